package wallclock

import (
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"time"
)

// EnvOffset names the environment variable Load reads.
const EnvOffset = "BATCHCLAIM_TEST_WALL_CLOCK_OFFSET"

var offset atomic.Int64 // nanoseconds

// Load sets the offset from EnvOffset (unset or empty: none). The error names the variable.
func Load() error {
	v := os.Getenv(EnvOffset)
	if v == "" {
		offset.Store(0)
		return nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return fmt.Errorf("%s=%q: want a duration such as -7m or 90s", EnvOffset, v)
	}
	offset.Store(int64(d))
	return nil
}

// Offset is the skew Load set (zero: none).
func Offset() time.Duration { return time.Duration(offset.Load()) }

// Now is the wall clock as this host reads it, skewed by the offset. It carries no monotonic
// reading: use time.Now for durations and deadlines.
func Now() time.Time { return Wall(time.Now()) }

// Wall is the wall-clock value of t (a reading of time.Now) as this host would have read it:
// without its monotonic reading, moved by the offset.
func Wall(t time.Time) time.Time { return t.Round(0).Add(Offset()) }

// ReplaceAttr is a slog.HandlerOptions.ReplaceAttr that writes each record's time as this
// host reads its wall clock (Wall).
func ReplaceAttr(groups []string, a slog.Attr) slog.Attr {
	if len(groups) == 0 && a.Key == slog.TimeKey && a.Value.Kind() == slog.KindTime {
		return slog.Time(slog.TimeKey, Wall(a.Value.Time()))
	}
	return a
}
