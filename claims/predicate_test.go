package claims_test

import (
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/claims"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
)

// predicateEnv: instance A (rank 0) holds svc-00000..svc-00003; instance B (rank 1) is
// registered and has not cycled yet.
type predicateEnv struct {
	pool   *pgxpool.Pool
	a, b   *claims.Engine
	aev    *events
	aHeld  []claims.Claim
	extras []string
}

func setupPredicate(t *testing.T) *predicateEnv {
	t.Helper()
	pool := dbtest.NewPool(t)
	registerServiceIDs(t, pool, 4)
	a, aev := newEngine(t, pool, 1, nil)
	if rep := cycle(t, a); rep.Held != 4 {
		t.Fatalf("A alone holds %d claims, want all 4", rep.Held)
	}
	b, _ := newEngine(t, pool, 2, nil)
	return &predicateEnv{pool: pool, a: a, b: b, aev: aev, aHeld: a.Held()}
}

func TestClaimPredicates(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	tests := []struct {
		name    string
		prepare func(t *testing.T, env *predicateEnv)
		shift   time.Duration // how far B's view of database time is moved
		wantB   int           // claims B holds after one cycle
		wantA   int           // claims still A's
		event   string        // claim_events entry the takeover must leave, if any
	}{
		{
			name: "free claims are taken",
			prepare: func(t *testing.T, env *predicateEnv) {
				if err := claims.RegisterServiceIDs(ctx, env.pool, "new-1", "new-2", "new-3", "new-4"); err != nil {
					t.Fatal(err)
				}
			},
			wantB: 4, wantA: 4, event: "acquired",
		},
		{name: "held claims are kept", wantB: 0, wantA: 4},
		{
			name: "renewed claims are kept past their first expiry",
			prepare: func(t *testing.T, env *predicateEnv) {
				// A renews 6s later: expiry_1 moves to +9s, past B's view at +4s by a margin a
				// slow machine between the two cycles does not eat (+5s left only 1s).
				env.a.ShiftDBTime(6 * time.Second)
				cycle(t, env.a)
			},
			shift: 4 * time.Second, wantB: 0, wantA: 4,
		},
		{name: "idle claims past expiry_1 are taken", shift: 4 * time.Second, wantB: 4, wantA: 0, event: "voided_idle"},
		{
			name: "busy claim past expiry_1 is kept",
			prepare: func(t *testing.T, env *predicateEnv) {
				if err := env.a.BeginSubmission(ctx, env.pool, env.aHeld[0]); err != nil {
					t.Fatal(err)
				}
			},
			shift: 4 * time.Second, wantB: 3, wantA: 1, event: "voided_idle",
		},
		{
			name: "busy claim past expiry_2 is taken",
			prepare: func(t *testing.T, env *predicateEnv) {
				if err := env.a.BeginSubmission(ctx, env.pool, env.aHeld[0]); err != nil {
					t.Fatal(err)
				}
			},
			shift: 16 * time.Second, wantB: 4, wantA: 0, event: "voided_expired",
		},
		{
			name: "released claims are taken at once",
			prepare: func(t *testing.T, env *predicateEnv) {
				if err := env.a.Shutdown(ctx); err != nil {
					t.Fatal(err)
				}
			},
			wantB: 4, wantA: 0, event: "released",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			env := setupPredicate(t)
			if tt.prepare != nil {
				tt.prepare(t, env)
			}
			env.b.ShiftDBTime(tt.shift)
			cycle(t, env.b)
			got := owners(t, env.pool)
			if n := countOwned(got, env.b); n != tt.wantB {
				t.Errorf("B holds %d claims, want %d", n, tt.wantB)
			}
			if n := countOwned(got, env.a); n != tt.wantA {
				t.Errorf("A still holds %d claims, want %d", n, tt.wantA)
			}
			aEpoch := map[string]int64{}
			for _, c := range env.aHeld {
				aEpoch[c.ServiceID] = c.Epoch
			}
			for svc, o := range got {
				if o.is(env.b) && o.epoch <= aEpoch[svc] {
					t.Errorf("%s taken over with epoch %d, want more than A's %d", svc, o.epoch, aEpoch[svc])
				}
			}
			if tt.event != "" {
				var n int
				if err := env.pool.QueryRow(ctx, `SELECT count(*) FROM batchclaim.claim_events WHERE event = $1`, tt.event).Scan(&n); err != nil {
					t.Fatal(err)
				}
				if n == 0 {
					t.Errorf("no %q entry in claim_events", tt.event)
				}
			}
		})
	}
}

func TestStaleEpochWriteIsRejected(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	env := setupPredicate(t)
	env.b.ShiftDBTime(4 * time.Second) // A's idle claims are past expiry_1 for B
	cycle(t, env.b)

	// A has not cycled since: in memory it still believes it holds svc-00000 with the epoch
	// it acquired it with.
	var acquired int64
	for _, c := range env.aHeld {
		if c.ServiceID == "svc-00000" {
			acquired = c.Epoch
		}
	}
	stale, ok := env.a.Holds("svc-00000")
	if !ok || acquired == 0 || stale.Epoch != acquired {
		t.Fatalf("A's memory: %+v %v, want epoch %d held", stale, ok, acquired)
	}
	tx, err := env.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	if err := env.a.Fence(ctx, tx, stale); !errors.Is(err, batchclaim.ErrClaimLost) {
		t.Fatalf("Fence with stale epoch: %v, want ErrClaimLost", err)
	}
	if stale.Context().Err() == nil {
		t.Fatal("the stale claim's context was not cancelled")
	}
	if _, ok := env.a.Holds("svc-00000"); ok {
		t.Fatal("A still lists the claim after the rejected write")
	}
	other := env.aHeld[1]
	if err := env.a.BeginSubmission(ctx, env.pool, other); !errors.Is(err, batchclaim.ErrClaimLost) {
		t.Fatalf("BeginSubmission with stale epoch: %v, want ErrClaimLost", err)
	}
	if err := env.a.EndSubmission(ctx, env.pool, env.aHeld[2]); !errors.Is(err, batchclaim.ErrClaimLost) {
		t.Fatalf("EndSubmission with stale epoch: %v, want ErrClaimLost", err)
	}
	if got := env.a.Stats().StaleWritesRejected; got != 3 {
		t.Fatalf("StaleWritesRejected = %d, want 3", got)
	}
	env.aev.mu.Lock()
	defer env.aev.mu.Unlock()
	if n := len(env.aev.lost[claims.LossFenced]); n != 3 {
		t.Fatalf("A reported %d claims lost by fencing, want 3", n)
	}
}

func TestNonOwnerCannotRenewOrWrite(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	env := setupPredicate(t)
	// B renews later than A (by its view of the database clock), still well within A's
	// expiry_1 (T1 = 3s) however slow the machine is between A's renewal and this cycle.
	env.b.ShiftDBTime(500 * time.Millisecond)
	cycle(t, env.b)

	// B's renewal extended B's lease only: A's claims keep A's expiry.
	var aExpiry, claimExpiry time.Time
	if err := env.pool.QueryRow(ctx, `SELECT expiry_1 FROM batchclaim.instances WHERE id = $1`, env.a.InstanceID()).Scan(&aExpiry); err != nil {
		t.Fatal(err)
	}
	if err := env.pool.QueryRow(ctx, `SELECT expiry_1 FROM batchclaim.service_id_claims_effective WHERE service_id = 'svc-00000'`).Scan(&claimExpiry); err != nil {
		t.Fatal(err)
	}
	if !claimExpiry.Equal(aExpiry) {
		t.Fatalf("claim's effective expiry_1 %v, want its owner's %v", claimExpiry, aExpiry)
	}
	// A write fenced on A's claim but made by B is refused.
	aClaim := env.aHeld[0]
	tx, err := env.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	if err := env.b.Fence(ctx, tx, aClaim); !errors.Is(err, batchclaim.ErrClaimLost) {
		t.Fatalf("B fencing on A's claim: %v, want ErrClaimLost", err)
	}
	if err := env.b.BeginSubmission(ctx, env.pool, aClaim); !errors.Is(err, batchclaim.ErrClaimLost) {
		t.Fatalf("B beginning a submission on A's claim: %v, want ErrClaimLost", err)
	}
	if n := countOwned(owners(t, env.pool), env.a); n != 4 {
		t.Fatalf("A holds %d claims after B's attempts, want 4", n)
	}
}
