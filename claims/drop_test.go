package claims_test

import (
	"context"
	"testing"
	"time"

	"github.com/batchclaim/batchclaim/claims"
	"github.com/batchclaim/batchclaim/ingest"
	"github.com/batchclaim/batchclaim/internal/dbtest"
)

// TestDropIdleClaims: claim rows of service_ids without unfinished work for DropIdleAfter are
// deleted by their owner, the rows of service_ids with work stay, an enqueue running while
// the drop looks (holding the enqueue lock in an open transaction) keeps its row, and the
// next enqueue of a dropped service_id brings its row back with a new, higher epoch.
func TestDropIdleClaims(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.NewPool(t)
	ids := registerServiceIDs(t, pool, 6)
	for _, id := range ids[:2] {
		if _, err := ingest.Enqueue(ctx, pool, id, "job-1", []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	e, ev := newEngine(t, pool, 1, func(c *claims.Config) { c.DropIdleAfter = time.Minute })
	if rep := cycle(t, e); rep.Held != 6 || rep.Dropped != 0 {
		t.Fatalf("first cycle: held %d, dropped %d; want 6 and 0 (nothing idle for a minute yet)", rep.Held, rep.Dropped)
	}
	epochs := map[string]int64{}
	for _, c := range e.Held() {
		epochs[c.ServiceID] = c.Epoch
	}

	// An enqueue of ids[5] is running: its transaction holds the enqueue lock and its batch
	// is not visible yet.
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	if _, err := ingest.Enqueue(ctx, tx, ids[5], "job-1", []byte("x")); err != nil {
		t.Fatal(err)
	}

	e.ShiftDBTime(2 * time.Minute)
	rep := cycle(t, e)
	if rep.Dropped != 3 || rep.Held != 3 {
		t.Fatalf("cycle past the idle time: dropped %d, held %d; want 3 dropped (ids 2-4) and 3 held", rep.Dropped, rep.Held)
	}
	for _, id := range []string{ids[0], ids[1], ids[5]} {
		if _, ok := e.Holds(id); !ok {
			t.Errorf("%s was dropped or lost; it has work (or an enqueue running)", id)
		}
	}
	ev.mu.Lock()
	if n := len(ev.lost[claims.LossDropped]); n != 3 {
		t.Errorf("OnLost reported %d claims dropped, want 3", n)
	}
	ev.mu.Unlock()
	var rows, events int
	if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM service_id_claims), (SELECT count(*) FROM claim_events WHERE event = 'dropped')`).Scan(&rows, &events); err != nil {
		t.Fatal(err)
	}
	if rows != 3 || events != 3 {
		t.Fatalf("claim rows %d, dropped events %d; want 3 and 3", rows, events)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if rep := cycle(t, e); rep.Dropped != 0 {
		t.Fatalf("dropped %d after the enqueue committed; ids[5] has work now", rep.Dropped)
	}

	// The next enqueue of a dropped service_id creates its row again; it is acquired with an
	// epoch above the one the dropped row had.
	if _, err := ingest.Enqueue(ctx, pool, ids[3], "job-2", []byte("x")); err != nil {
		t.Fatal(err)
	}
	cycle(t, e)
	c, ok := e.Holds(ids[3])
	if !ok {
		t.Fatalf("%s not claimed again after a new enqueue", ids[3])
	}
	if c.Epoch <= epochs[ids[3]] {
		t.Fatalf("%s came back with epoch %d, want more than its old %d", ids[3], c.Epoch, epochs[ids[3]])
	}
}
