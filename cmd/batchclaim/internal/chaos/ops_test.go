package chaos

import (
	"math/rand/v2"
	"testing"
)

// Every operation kind has a row in operations, with a function that carries it out, and
// every row is a kind a Config may name.
func TestOperationTable(t *testing.T) {
	t.Parallel()
	kinds := Operations()
	for _, k := range kinds {
		if operations[k].apply == nil {
			t.Errorf("operation %s has no row in operations, or no apply function", k)
		}
	}
	if len(operations) != len(kinds) {
		t.Errorf("operations has %d rows, Operations %d: %v", len(operations), len(kinds), kinds)
	}
	if rec := (&run{}).operate(t.Context(), "no_such_op", nil); rec.Kind != "no_such_op" || rec.Result != "unknown operation" || rec.Acted {
		t.Errorf("operate of an unknown kind: %+v", rec)
	}
}

// The random phase draws, among the configured kinds, only those with a weight, those that
// act on the instances only while there is room for them, and none that has nothing to do:
// clock_rate and retention_on need a slot without them.
func TestPickOp(t *testing.T) {
	t.Parallel()
	draws := func(r *run, fleet bool) map[string]int {
		rng := rand.New(rand.NewPCG(1, 2))
		got := map[string]int{}
		for range 2000 {
			got[r.pickOp(rng, fleet)]++
		}
		return got
	}
	r := &run{cfg: Config{Ops: Operations()}, instances: []*instance{{}}}
	all := draws(r, true)
	for _, k := range Operations() {
		if drawn := all[k] > 0; drawn != (operations[k].weight > 0) {
			t.Errorf("fleet room, a free slot: %s drawn %d times with weight %d", k, all[k], operations[k].weight)
		}
	}
	// Drawn in proportion to the weights: retry (4) about four times as often as pool_hog (1).
	if ratio := float64(all[OpRetry]) / float64(all[OpPoolHog]); ratio < 2.5 || ratio > 6 {
		t.Errorf("retry drawn %d times, pool_hog %d: want about 4 to 1", all[OpRetry], all[OpPoolHog])
	}
	for k, n := range draws(r, false) {
		if operations[k].fleet {
			t.Errorf("no fleet room: %s, which acts on the instances, drawn %d times", k, n)
		}
	}
	r = &run{cfg: Config{Ops: []string{OpClockRate, OpRetentionOn, OpPoolHog}}} // no slot at all
	for k, n := range draws(r, true) {
		if k != OpPoolHog {
			t.Errorf("no slot: %q drawn %d times, want only pool_hog", k, n)
		}
	}
	r = &run{cfg: Config{Ops: []string{OpLongSnapshot, OpDropIdleOn}}}
	r.snapOpen.Store(true)
	if got := draws(r, true); len(got) != 1 || got[""] != 2000 {
		t.Errorf("a snapshot open, drop_idle_on of weight 0: drew %v, want nothing", got)
	}
}
