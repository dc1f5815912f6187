package wallclock_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/batchclaim/batchclaim/wallclock"
)

// setenv sets the environment variable name to value and returns a func that puts back what
// was there before, so that an example leaves the environment as it found it.
func setenv(name, value string) (restore func()) {
	old, had := os.LookupEnv(name)
	_ = os.Setenv(name, value)
	return func() {
		if had {
			_ = os.Setenv(name, old)
		} else {
			_ = os.Unsetenv(name)
		}
	}
}

// Load reads the offset from BATCHCLAIM_TEST_WALL_CLOCK_OFFSET; Wall and Now then read the
// wall clock that much off, without a monotonic reading. A value that is not a duration is
// refused with an error naming the variable, and leaves the offset as it was.
func ExampleLoad() {
	defer func() { _ = wallclock.Load() }() // the offset of the restored environment
	defer setenv(wallclock.EnvOffset, "-7m")()
	fmt.Println(wallclock.Load(), wallclock.Offset())

	t := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	fmt.Println(wallclock.Wall(t).Format(time.RFC3339))
	fmt.Println(wallclock.Now().Sub(time.Now()).Round(time.Minute))

	_ = os.Setenv(wallclock.EnvOffset, "seven minutes")
	fmt.Println(wallclock.Load())
	fmt.Println(wallclock.Offset())

	_ = os.Setenv(wallclock.EnvOffset, "")
	fmt.Println(wallclock.Load(), wallclock.Offset())
	// Output:
	// <nil> -7m0s
	// 2025-03-01T11:53:00Z
	// -7m0s
	// BATCHCLAIM_TEST_WALL_CLOCK_OFFSET="seven minutes": want a duration such as -7m or 90s
	// -7m0s
	// <nil> 0s
}

// A log handler given ReplaceAttr writes each record's time as the skewed host reads it.
// The record here carries a fixed time; a logger would stamp it with time.Now.
func ExampleReplaceAttr() {
	defer func() { _ = wallclock.Load() }()
	defer setenv(wallclock.EnvOffset, "90s")()
	if err := wallclock.Load(); err != nil {
		panic(err)
	}
	h := slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{ReplaceAttr: wallclock.ReplaceAttr})
	r := slog.NewRecord(time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC), slog.LevelInfo, "claim acquired", 0)
	r.AddAttrs(slog.String("service_id", "order-42"))
	if err := h.Handle(context.Background(), r); err != nil {
		panic(err)
	}
	// Output:
	// time=2025-03-01T12:01:30.000Z level=INFO msg="claim acquired" service_id=order-42
}

// LoadRate reads a schedule of clock rates from BATCHCLAIM_TEST_CLOCK_RATE, repeated from
// the moment it runs. Span is how long in real time the host's clock takes to count a
// duration: twice as long while it runs at half speed. A schedule with a rate out of range is
// refused and leaves none: Span then returns the duration itself.
func ExampleSpan() {
	defer func() { _ = wallclock.LoadRate() }()
	defer setenv(wallclock.EnvRate, "1:10s,0.5:10s,2:10s")()
	start := time.Now()
	if err := wallclock.LoadRate(); err != nil {
		panic(err)
	}
	for _, at := range []time.Duration{5 * time.Second, 15 * time.Second, 25 * time.Second, 35 * time.Second} {
		now := start.Add(at)
		fmt.Printf("+%v: rate %v, 1s takes %v\n", at, wallclock.Rate(now), wallclock.Span(now, time.Second))
	}

	_ = os.Setenv(wallclock.EnvRate, "0.1:10s")
	fmt.Println(wallclock.LoadRate())
	fmt.Println(wallclock.Span(time.Now(), time.Second))
	// Output:
	// +5s: rate 1, 1s takes 1s
	// +15s: rate 0.5, 1s takes 2s
	// +25s: rate 2, 1s takes 500ms
	// +35s: rate 1, 1s takes 1s
	// BATCHCLAIM_TEST_CLOCK_RATE="0.1:10s": want rate:duration pairs such as 1:20s,0.8:15s (a rate in (0.25, 4])
	// 1s
}
