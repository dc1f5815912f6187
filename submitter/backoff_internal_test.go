package submitter

import (
	"testing"
	"time"
)

func TestBackoffGrowsIsCappedAndHonoursRetryAfter(t *testing.T) {
	p := &Pool{cfg: Config{BackoffBase: 100 * time.Millisecond, BackoffMax: 2 * time.Second}}
	for attempts, want := range []time.Duration{100, 200, 400, 800, 1600} {
		want *= time.Millisecond
		if d := p.backoff(attempts, 0); d < want/2 || d > want*3/2 {
			t.Errorf("attempt %d: %s, want %s +-50%%", attempts, d, want)
		}
	}
	for _, attempts := range []int{10, 100} {
		if d := p.backoff(attempts, 0); d < time.Second || d > 3*time.Second {
			t.Errorf("attempt %d: %s, want about the 2s cap (+-50%%)", attempts, d)
		}
	}
	if d := p.backoff(0, 5*time.Second); d != 5*time.Second {
		t.Errorf("Retry-After 5s gave %s", d)
	}
}
