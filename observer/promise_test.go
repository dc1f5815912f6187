package observer_test

import (
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/batchclaim/batchclaim/observer"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
	"github.com/batchclaim/batchclaim/testkit/testutil"
)

// Retention never deletes a job a Retry revived: a chunk that picked the finished job before
// the retry committed finds it unfinished once the retry's row lock is released, and leaves
// it. The retry is held open in a transaction until the chunk's DELETE waits for its lock.
func TestRetentionSparesAJobARetryRevived(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.NewPool(t)
	seq := storeAged(t, pool, "svc", "old", "INVALID", 3*time.Hour)

	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if c, err := observer.Retry(ctx, tx, seq); err != nil || c.To != "NEW" {
		t.Fatalf("Retry = %+v, %v; want INVALID -> NEW", c, err)
	}
	r, err := observer.NewRetention(dbtest.Open(t, pool, ""), observer.RetentionConfig{MaxAge: time.Hour, InstanceID: uuid.New()})
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		run observer.RetentionRun
		err error
	}
	done := make(chan result, 1)
	go func() {
		run, err := r.PruneOnce(ctx, nil)
		done <- result{run, err}
	}()
	testutil.WaitFor(t, 10*time.Second, "the retention DELETE waits for the retry's lock", func() bool {
		var waiting int
		_ = pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%RetentionPrune%'`).Scan(&waiting)
		return waiting == 1
	})
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	res := <-done
	if res.err != nil {
		t.Fatal(res.err)
	}
	var state string
	if err := pool.QueryRow(ctx, `SELECT state FROM batchclaim.batches WHERE seq = $1`, seq).Scan(&state); err != nil || state != "NEW" {
		t.Fatalf("the retried job after retention: %q (%v), pruned %d; want it kept, NEW", state, err, res.run.Pruned)
	}
}
