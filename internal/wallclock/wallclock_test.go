package wallclock

import (
	"strings"
	"testing"
	"time"
)

func TestLoad(t *testing.T) {
	t.Setenv(EnvOffset, "-7m")
	if err := Load(); err != nil || Offset() != -7*time.Minute {
		t.Fatalf("Load = %v, offset %v; want -7m", err, Offset())
	}
	real := time.Now()
	skewed := Wall(real)
	if d := real.Round(0).Sub(skewed); d != 7*time.Minute {
		t.Fatalf("Wall moved the reading by %v, want 7m back", d)
	}
	if strings.Contains(skewed.String(), "m=") {
		t.Fatalf("Wall kept a monotonic reading: %v", skewed)
	}
	// Durations between readings of time.Now are not touched by the hook.
	if time.Since(real) < 0 || time.Since(real) > time.Minute {
		t.Fatalf("time.Since of a real reading = %v", time.Since(real))
	}
	t.Setenv(EnvOffset, "seven minutes")
	if err := Load(); err == nil || !strings.Contains(err.Error(), EnvOffset) {
		t.Fatalf("Load of a bad value = %v, want an error naming %s", err, EnvOffset)
	}
	t.Setenv(EnvOffset, "")
	if err := Load(); err != nil || Offset() != 0 {
		t.Fatalf("Load of an empty value = %v, offset %v", err, Offset())
	}
}
