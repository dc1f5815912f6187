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

func TestRate(t *testing.T) {
	t.Setenv(EnvRate, "1:10s,0.5:10s,2:10s")
	if err := LoadRate(); err != nil {
		t.Fatal(err)
	}
	start := rates.from
	for _, tc := range []struct {
		at   time.Duration
		rate float64
		span time.Duration // of one second
	}{
		{0, 1, time.Second},
		{15 * time.Second, 0.5, 2 * time.Second}, // slow: a local second lasts two real ones
		{25 * time.Second, 2, time.Second / 2},
		{35 * time.Second, 1, time.Second}, // the schedule repeats
	} {
		now := start.Add(tc.at)
		if got := Rate(now); got != tc.rate {
			t.Errorf("Rate at +%v = %v, want %v", tc.at, got, tc.rate)
		}
		if got := Span(now, time.Second); got != tc.span {
			t.Errorf("Span of 1s at +%v = %v, want %v", tc.at, got, tc.span)
		}
	}
	for _, bad := range []string{"fast", "0.8", "0.8:x", "0:10s", "5:10s", "1:-1s"} {
		t.Setenv(EnvRate, bad)
		if err := LoadRate(); err == nil || !strings.Contains(err.Error(), EnvRate) {
			t.Errorf("LoadRate(%q) = %v, want an error naming %s", bad, err, EnvRate)
		}
		if Rate(time.Now()) != 1 {
			t.Errorf("after a bad value %q the rate is %v, want 1", bad, Rate(time.Now()))
		}
	}
	t.Setenv(EnvRate, "")
	if err := LoadRate(); err != nil || Rate(time.Now()) != 1 {
		t.Fatalf("LoadRate of an empty value = %v", err)
	}
}
