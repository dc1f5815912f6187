package main

import (
	"math"
	"testing"
)

// The histogram quantile interpolates within the bucket as Prometheus' histogram_quantile
// does, and adding and subtracting readings gives the histogram of a window.
func TestCycleHistQuantile(t *testing.T) {
	reading := func(counts ...float64) cycleHist {
		return cycleHist{bounds: []float64{0.001, 0.01, 0.1}, counts: counts[:3], count: counts[3]}
	}
	before := reading(10, 10, 10, 10)
	after := reading(10, 60, 110, 110) // the window: 50 cycles in (1, 10] ms, 50 in (10, 100] ms
	var w cycleHist
	w.add(after, 1)
	w.add(before, -1)
	for _, c := range []struct{ q, want float64 }{
		{0.5, 0.01},                   // the end of the second bucket
		{0.25, 0.001 + 0.009*25.0/50}, // half way through the second bucket
		{0.99, 0.01 + 0.09*49.0/50},   // near the end of the third
		{1, 0.1},
	} {
		if got := w.quantile(c.q); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("q %v: %v, want %v", c.q, got, c.want)
		}
	}
	if got := (cycleHist{}).quantile(0.99); got != 0 {
		t.Errorf("empty: %v, want 0", got)
	}
	// Past the last bound (the +Inf bucket): the last bound.
	if got := reading(0, 0, 0, 5).quantile(0.5); got != 0.1 {
		t.Errorf("all in +Inf: %v, want 0.1", got)
	}
}
