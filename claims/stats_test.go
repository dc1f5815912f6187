package claims_test

import (
	"sync/atomic"
	"testing"

	"github.com/batchclaim/batchclaim/claims"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
)

// TestCycleDurations: every cycle is counted in Stats().CycleSeconds, in cumulative buckets.
func TestCycleDurations(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewPool(t)
	registerServiceIDs(t, pool, 10)
	e, _ := newEngine(t, pool, 1, nil)
	if h := e.Stats().CycleSeconds; h.Count != 0 || h.Sum != 0 {
		t.Fatalf("before any cycle: count %d, sum %v", h.Count, h.Sum)
	}
	for range 3 {
		cycle(t, e)
	}
	h := e.Stats().CycleSeconds
	if h.Count != 3 || h.Sum <= 0 {
		t.Fatalf("after 3 cycles: count %d, sum %v s", h.Count, h.Sum)
	}
	if len(h.Bounds) == 0 || len(h.Bounds) != len(h.Counts) {
		t.Fatalf("%d bounds, %d counts", len(h.Bounds), len(h.Counts))
	}
	for i := range h.Counts {
		if i > 0 && (h.Counts[i] < h.Counts[i-1] || h.Bounds[i] <= h.Bounds[i-1]) {
			t.Fatalf("not cumulative: bounds %v, counts %v", h.Bounds, h.Counts)
		}
	}
	if last := h.Counts[len(h.Counts)-1]; last > h.Count {
		t.Fatalf("top bucket %d > count %d", last, h.Count)
	}
	// A cycle over ten rows on a local database takes well under the top bound (10 s).
	if h.Counts[len(h.Counts)-1] != 3 {
		t.Fatalf("counts %v: want all 3 cycles within %v s", h.Counts, h.Bounds[len(h.Bounds)-1])
	}
}

// TestVoidsCountWhenTheCycleFailsAfterThem: voiding commits before the cycle acquires, so a
// cycle whose acquisition fails still counts the claims it voided in Stats().Voided and hands
// them to OnVoided.
func TestVoidsCountWhenTheCycleFailsAfterThem(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.NewPool(t)
	registerServiceIDs(t, pool, 4)
	dead, _ := newEngine(t, pool, 1, nil)
	if rep := cycle(t, dead); rep.Held != 4 {
		t.Fatalf("the first engine holds %d, want 4", rep.Held)
	}
	var onVoided atomic.Int64
	heir, _ := newEngine(t, pool, 2, func(c *claims.Config) {
		c.OnVoided = func(claims.Voided) { onVoided.Add(1) }
	})
	// The first engine's lease ends by the database clock; then any acquisition fails.
	if _, err := pool.Exec(ctx, `UPDATE batchclaim.instances SET expiry_1 = now() - interval '2 minutes', expiry_2 = now() - interval '1 minute' WHERE id = $1`, dead.InstanceID()); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `
		CREATE FUNCTION batchclaim.test_refuse_acquisition() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF NEW.claimant IS NOT NULL THEN RAISE EXCEPTION 'acquisition refused by the test'; END IF;
			RETURN NEW;
		END $$;
		CREATE TRIGGER test_refuse_acquisition BEFORE UPDATE ON batchclaim.service_id_claims
			FOR EACH ROW EXECUTE FUNCTION batchclaim.test_refuse_acquisition()`); err != nil {
		t.Fatal(err)
	}
	if _, err := heir.Cycle(ctx); err == nil {
		t.Fatal("the cycle succeeded although every acquisition is refused")
	}
	var free int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM batchclaim.service_id_claims WHERE claimant IS NULL`).Scan(&free); err != nil {
		t.Fatal(err)
	}
	if free != 4 {
		t.Fatalf("%d claims voided in the database, want 4", free)
	}
	if got := heir.Stats().Voided; got != 4 || onVoided.Load() != 4 {
		t.Fatalf("Stats().Voided = %d and OnVoided called %d times after a cycle that voided 4 and then failed, want 4 and 4", got, onVoided.Load())
	}
}
