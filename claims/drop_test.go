package claims_test

import (
	"testing"
	"time"

	"github.com/batchclaim/batchclaim/claims"
	"github.com/batchclaim/batchclaim/ingest"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
)

// TestDropIdleClaims: claim rows of service_ids without unfinished work for DropIdleAfter are
// deleted by their owner, the rows of service_ids with work stay, an enqueue running while
// the drop looks (holding the enqueue lock in an open transaction) keeps its row, and the
// next enqueue of a dropped service_id brings its row back with a new, higher epoch.
func TestDropIdleClaims(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
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
	if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM batchclaim.service_id_claims), (SELECT count(*) FROM batchclaim.claim_events WHERE event = 'dropped')`).Scan(&rows, &events); err != nil {
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

// TestDropIdleFreeRows: idle free claim rows are deleted by whichever live instance sees them,
// without being acquired first (no epoch drawn, no claim event). While more idle free rows
// are left than one cycle drops, an instance acquires only rows with unfinished work, and no
// more than its fair part of them; once the rest fit in a cycle it acquires as usual. A free
// row whose enqueue is running keeps its row, and does not make the drop stop early.
func TestDropIdleFreeRows(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.NewPool(t)
	const idle = 6000 // more than one cycle drops (25 chunks of 200)
	ids := registerServiceIDs(t, pool, idle)
	if _, err := pool.Exec(ctx, `UPDATE batchclaim.service_id_claims SET registered_at = now() - interval '2 minutes'`); err != nil {
		t.Fatal(err)
	}
	work := []string{ids[10], ids[20], ids[30]} // idle by their age, but with work
	for _, id := range work {
		if _, err := ingest.Enqueue(ctx, pool, id, "job-1", []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	// An enqueue of ids[40] is running: its transaction holds the enqueue lock and its batch
	// is not visible yet.
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	if _, err := ingest.Enqueue(ctx, tx, ids[40], "job-1", []byte("x")); err != nil {
		t.Fatal(err)
	}

	// The engines do not run, so nothing renews their leases between the cycles below: the
	// expiries are long enough that a slow cycle on a loaded machine does not let b take a's
	// claims as expired.
	drop := func(c *claims.Config) {
		c.DropIdleAfter = time.Minute
		c.Expiry1, c.Expiry2 = 40*time.Second, 50*time.Second
	}
	a, _ := newEngine(t, pool, 1, drop)
	b, _ := newEngine(t, pool, 2, drop)

	// a drops a cycle's worth and, with idle rows still left, takes only rows with work: its
	// fair part of the three, two.
	// (Once ids[40] comes first in the free rows' order it takes a place in each chunk.)
	rep := cycle(t, a)
	if rep.Dropped < 5000-25 || rep.Dropped > 5000 || rep.Held != 2 {
		t.Fatalf("first cycle of a: dropped %d, held %d; want 4975 to 5000 and 2 (half the rows with work, rounded up)", rep.Dropped, rep.Held)
	}
	droppedByA := rep.Dropped
	for _, c := range a.Held() {
		if c.ServiceID != work[0] && c.ServiceID != work[1] && c.ServiceID != work[2] {
			t.Errorf("a acquired %s, which has no work", c.ServiceID)
		}
	}
	// b drops the rest (all but the row whose enqueue is running) and acquires as usual:
	// the last row with work and ids[40].
	rep = cycle(t, b)
	if want := idle - droppedByA - len(work) - 1; rep.Dropped != want || rep.Held != 2 {
		t.Fatalf("first cycle of b: dropped %d, held %d; want %d and 2", rep.Dropped, rep.Held, want)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if rep := cycle(t, a); rep.Dropped != 0 || rep.Held != 2 {
		t.Fatalf("second cycle of a: dropped %d, held %d; want 0 and 2", rep.Dropped, rep.Held)
	}
	m := owners(t, pool)
	if len(m) != len(work)+1 {
		t.Fatalf("%d claim rows left, want %d (the rows with work)", len(m), len(work)+1)
	}
	for _, id := range append(work, ids[40]) {
		if o, ok := m[id]; !ok || o.claimant == nil {
			t.Errorf("%s: row kept %v, claimed %v; want kept and claimed", id, ok, ok && o.claimant != nil)
		}
	}
	var acquired, dropped int
	if err := pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE event = 'acquired'), count(*) FILTER (WHERE event = 'dropped') FROM batchclaim.claim_events`).Scan(&acquired, &dropped); err != nil {
		t.Fatal(err)
	}
	if acquired != 4 || dropped != 0 {
		t.Fatalf("claim events: %d acquired, %d dropped; want 4 and 0 (free rows are dropped without being acquired)", acquired, dropped)
	}
	if got := a.Stats().Dropped + b.Stats().Dropped; got != int64(idle-len(work)-1) {
		t.Fatalf("Stats().Dropped adds up to %d, want %d", got, idle-len(work)-1)
	}
}
