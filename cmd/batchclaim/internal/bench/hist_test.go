package bench

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
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

// A window counts only the cycles that began in it: the cycle running when it opened (slow,
// before a VACUUM, say) is recorded when the next begins, and must not be.
func TestCycleClockSince(t *testing.T) {
	t.Parallel()
	c := &cycleClock{StmtCounter: NewStmtCounter()}
	ctx := context.Background()
	stmt := func(name string, d time.Duration) {
		sctx := c.TraceQueryStart(ctx, nil, pgx.TraceQueryStartData{SQL: "-- name: " + name + " :one\nSELECT 1"})
		time.Sleep(d)
		c.TraceQueryEnd(sctx, nil, pgx.TraceQueryEndData{})
	}
	const slow = 200 * time.Millisecond // far above the short cycle's 4ms, however loaded the machine
	stmt(cycleFirstStatement, slow)     // a slow cycle, running when the window opens
	c.since(time.Now())
	stmt(cycleFirstStatement, 2*time.Millisecond) // records the one before, which began before the window
	stmt("ClaimsHeld", 2*time.Millisecond)
	stmt(renewalStatement, slow) // a renewal is no part of the cycle
	stmt(cycleFirstStatement, 2*time.Millisecond)
	got := c.take()
	if len(got) != 1 {
		t.Fatalf("cycles in the window = %v, want exactly the one that began in it", got)
	}
	if got[0] < 4*time.Millisecond || got[0] >= slow {
		t.Fatalf("cycle = %v, want its two statements (4ms and a little) and not the renewal", got[0])
	}
}
