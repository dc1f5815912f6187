package claims_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batchclaim/batchclaim/claims"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
)

// Small timings for tests: R = 200ms, T1 = 3s, T2 = 15s.
var testTimings = claims.Config{RenewInterval: 200 * time.Millisecond, Expiry1: 3 * time.Second, Expiry2: 15 * time.Second}

// instanceID makes ids that sort in the order of n, so fair-share ranks are predictable.
func instanceID(n int) uuid.UUID {
	return uuid.MustParse(fmt.Sprintf("00000000-0000-4000-8000-%012d", n))
}

// events records what the hooks of one engine reported.
type events struct {
	mu     sync.Mutex
	gained []claims.Claim
	lost   map[claims.LossReason][]claims.Claim
	lostCh chan claims.LossReason
}

func newEngine(t testing.TB, pool *pgxpool.Pool, n int, tweak func(*claims.Config)) (*claims.Engine, *events) {
	t.Helper()
	ev := &events{lost: map[claims.LossReason][]claims.Claim{}, lostCh: make(chan claims.LossReason, 100000)}
	cfg := testTimings
	cfg.InstanceID = instanceID(n)
	cfg.Name = fmt.Sprintf("i%d", n)
	cfg.OnGained = func(c claims.Claim) { ev.mu.Lock(); ev.gained = append(ev.gained, c); ev.mu.Unlock() }
	cfg.OnLost = func(c claims.Claim, r claims.LossReason) {
		ev.mu.Lock()
		ev.lost[r] = append(ev.lost[r], c)
		ev.mu.Unlock()
		ev.lostCh <- r
	}
	if tweak != nil {
		tweak(&cfg)
	}
	e, err := claims.New(dbtest.Open(t, pool, ""), cfg)
	if err != nil {
		t.Fatalf("new engine: %v", err)
	}
	if err := e.Register(t.Context()); err != nil {
		t.Fatalf("register: %v", err)
	}
	return e, ev
}

func registerServiceIDs(t testing.TB, pool *pgxpool.Pool, n int) []string {
	t.Helper()
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("svc-%05d", i)
	}
	if err := claims.RegisterServiceIDs(t.Context(), pool, ids...); err != nil {
		t.Fatalf("register service ids: %v", err)
	}
	return ids
}

func cycle(t testing.TB, e *claims.Engine) claims.CycleReport {
	t.Helper()
	rep, err := e.Cycle(t.Context())
	if err != nil {
		t.Fatalf("cycle of %s: %v", e.Name(), err)
	}
	return rep
}

// owners reads claimant and epoch of every claim row.
func owners(t testing.TB, pool *pgxpool.Pool) map[string]owner {
	t.Helper()
	rows, err := pool.Query(t.Context(), `SELECT service_id, claimant, epoch FROM batchclaim.service_id_claims`)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]owner{}
	for rows.Next() {
		var s string
		var o owner
		if err := rows.Scan(&s, &o.claimant, &o.epoch); err != nil {
			t.Fatal(err)
		}
		out[s] = o
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

type owner struct {
	claimant *uuid.UUID
	epoch    int64
}

func (o owner) is(e *claims.Engine) bool { return o.claimant != nil && *o.claimant == e.InstanceID() }

func countOwned(m map[string]owner, e *claims.Engine) int {
	n := 0
	for _, o := range m {
		if o.is(e) {
			n++
		}
	}
	return n
}
