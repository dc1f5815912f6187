package claims_test

import (
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/claims"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
)

// Two processes given the same fixed instance id must never both pass the fences. A
// successor is refused while the first process's lease is live (it may be paused mid-POST);
// once that lease is past expiry_2 the successor replaces the row, and the old process,
// resumed, can neither renew, nor adopt the successor's claims, nor pass a fence.
func TestFixedInstanceIDCannotBeShared(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.NewPool(t)
	registerServiceIDs(t, pool, 4)
	old, _ := newEngine(t, pool, 1, nil)
	cycle(t, old)
	oldClaim, ok := old.Holds("svc-00000")
	if !ok {
		t.Fatal("first process holds nothing")
	}

	cfg := testTimings
	cfg.InstanceID, cfg.Name = old.InstanceID(), "successor"
	succ, err := claims.New(dbtest.Open(t, pool, ""), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := succ.Register(ctx); !errors.Is(err, claims.ErrInstanceIDInUse) {
		t.Fatalf("successor registered while the first process's lease is live: err = %v, want ErrInstanceIDInUse", err)
	}

	// The first process is paused past expiry_2: its lease ends by the database clock.
	if _, err := pool.Exec(ctx, `UPDATE batchclaim.instances SET expiry_1 = now() - interval '2 minutes', expiry_2 = now() - interval '1 minute' WHERE id = $1`, old.InstanceID()); err != nil {
		t.Fatal(err)
	}
	if err := succ.Register(ctx); err != nil {
		t.Fatalf("successor not registered over a dead lease: %v", err)
	}
	rep := cycle(t, succ)
	if rep.Held != 4 {
		t.Fatalf("successor holds %d claims, want all 4", rep.Held)
	}
	newClaim, _ := succ.Holds("svc-00000")
	if newClaim.Epoch <= oldClaim.Epoch {
		t.Fatalf("successor's epoch %d not above the old %d", newClaim.Epoch, oldClaim.Epoch)
	}

	// The old process resumes. Whatever it does is refused.
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	err = old.Fence(ctx, tx, oldClaim)
	_ = tx.Rollback(ctx)
	if !errors.Is(err, batchclaim.ErrClaimLost) {
		t.Fatalf("old process's fence: %v, want ErrClaimLost", err)
	}
	if _, err := old.Cycle(ctx); err == nil {
		t.Fatal("old process's claim cycle succeeded on the successor's row")
	}
	for _, c := range old.Held() {
		if s, _ := succ.Holds(c.ServiceID); s.Epoch == c.Epoch {
			t.Fatalf("old process holds %s with the successor's epoch %d", c.ServiceID, c.Epoch)
		}
	}
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return old.BeginSubmission(ctx, tx, oldClaim) })
	if !errors.Is(err, batchclaim.ErrClaimLost) {
		t.Fatalf("old process's BeginSubmission: %v, want ErrClaimLost", err)
	}
	// The successor's claims are untouched, and its own fence passes.
	if rep := cycle(t, succ); rep.Held != 4 || len(rep.Lost) != 0 {
		t.Fatalf("successor after the old process came back: held %d, lost %v", rep.Held, rep.Lost)
	}
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return succ.Fence(ctx, tx, newClaim) })
	if err != nil {
		t.Fatalf("successor's fence: %v", err)
	}
	// And the old process's shutdown does not remove the successor's row.
	_ = old.Shutdown(ctx)
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM batchclaim.instances WHERE id = $1`, succ.InstanceID()).Scan(&n); err != nil || n != 1 {
		t.Fatalf("successor's row after the old process's shutdown: %d rows, %v", n, err)
	}
}
