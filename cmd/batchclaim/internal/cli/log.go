package cli

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/batchclaim/batchclaim/wallclock"
)

// LogFlags registers --log-level and --log-format and returns a constructor.
func LogFlags(fs *flag.FlagSet) func(w io.Writer) (*slog.Logger, error) {
	level := fs.String("log-level", "info", "debug | info | warn | error")
	format := fs.String("log-format", "text", "text | json")
	return func(w io.Writer) (*slog.Logger, error) {
		var l slog.Level
		if err := l.UnmarshalText([]byte(*level)); err != nil {
			return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", *level)
		}
		if err := wallclock.Load(); err != nil { // the wall-clock skew of tests, if any
			return nil, err
		}
		if err := wallclock.LoadRate(); err != nil { // the clock rate of tests, if any
			return nil, err
		}
		opts := &slog.HandlerOptions{Level: l, ReplaceAttr: wallclock.ReplaceAttr}
		var logger *slog.Logger
		switch strings.ToLower(*format) {
		case "text":
			logger = slog.New(slog.NewTextHandler(w, opts))
		case "json":
			logger = slog.New(slog.NewJSONHandler(w, opts))
		default:
			return nil, fmt.Errorf("--log-format %q: want text or json", *format)
		}
		if off := wallclock.Offset(); off != 0 {
			logger.Warn("wall clock skewed for a test", "offset", off.String(), "env", wallclock.EnvOffset)
		}
		if v := os.Getenv(wallclock.EnvRate); v != "" {
			logger.Warn("clock rate changed for a test: the lease's local deadline runs by it", "schedule", v, "env", wallclock.EnvRate)
		}
		for _, w := range Warnings(fs) {
			logger.Warn(w)
		}
		return logger, nil
	}
}
