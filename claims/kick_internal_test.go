package claims

import (
	"testing"
	"time"
)

// TestKickPacer: a Kick right after a cycle on the ticker runs at once; Kicks that follow
// each other are spaced by the gap from the last early cycle.
func TestKickPacer(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	p := kickPacer{gap: 250 * time.Millisecond}
	for _, step := range []struct {
		at   time.Duration // since t0
		want time.Duration
	}{
		{0, 0}, // the first Kick: at once (a cycle on the ticker may have just run)
		{10 * time.Millisecond, 240 * time.Millisecond},  // a burst: spaced from the early cycle at t0
		{300 * time.Millisecond, 200 * time.Millisecond}, // the last early cycle was due at 250ms
		{2 * time.Second, 0},                             // long after: at once
	} {
		if got := p.wait(t0.Add(step.at)); got != step.want {
			t.Errorf("Kick at %s: wait %s, want %s", step.at, got, step.want)
		}
	}
}
