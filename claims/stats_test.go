package claims_test

import (
	"testing"

	"github.com/batchclaim/batchclaim/internal/dbtest"
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
