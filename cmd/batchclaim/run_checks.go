package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/batchclaim/batchclaim/claims"
	"github.com/batchclaim/batchclaim/node"
)

// Bounds of the timing knobs that `run` accepts. Below the floors an instance spends itself
// renewing (R = expiry-1/6 of a 1ms typo is 166µs: thousands of transactions and
// reconnects a second, no work); above the ceiling durations derived from them (T2 = 4 x
// T1, the prune age 10 x T2) would overflow, and no deployment waits a day for a claim.
const (
	minRenewInterval = 50 * time.Millisecond
	minExpiry1       = 500 * time.Millisecond
	maxTiming        = 24 * time.Hour
)

// timingFlagNames are the timing knobs' flags, in the order errors list them.
var timingFlagNames = []string{"renew-interval", "local-deadline", "expiry-1", "expiry-2", "submit-timeout", "stop-time", "margin"}

// checkTimingFlags checks the timing flags the user set, before anything is derived from
// them: each within (0, 24h], expiry-1 and renew-interval above their floors.
func checkTimingFlags(fs *flag.FlagSet) error {
	var errs []error
	for _, name := range timingFlagNames {
		if !flagGiven(fs, name) {
			continue
		}
		d := fs.Lookup(name).Value.(flag.Getter).Get().(time.Duration)
		switch {
		case d <= 0:
			errs = append(errs, fmt.Errorf("--%s %s: must be positive (leave it unset for the default)", name, d))
		case d > maxTiming:
			errs = append(errs, fmt.Errorf("--%s %s: at most %s", name, d, maxTiming))
		case name == "expiry-1" && d < minExpiry1:
			errs = append(errs, fmt.Errorf("--expiry-1 %s: at least %s%s; the renew interval follows from it and would be %s", d, minExpiry1, typoFor(d), d/6))
		case name == "renew-interval" && d < minRenewInterval:
			errs = append(errs, fmt.Errorf("--renew-interval %s: at least %s; each renewal is a database round trip", d, minRenewInterval))
		}
	}
	return errors.Join(errs...)
}

// typoFor guesses what a very short duration meant: "1ms" typed for "1m".
func typoFor(d time.Duration) string {
	if d%time.Millisecond == 0 && d < 60*time.Millisecond {
		return fmt.Sprintf(" (did you mean %dm?)", d/time.Millisecond)
	}
	return ""
}

// checkResolvedTimings checks the timings in force, derived ones included, against the
// floors (a renew interval derived from expiry-1 included).
func checkResolvedTimings(t claims.Timings) error {
	if t.RenewInterval < minRenewInterval {
		return fmt.Errorf("renew interval R = %s is under %s: set --renew-interval, or a longer --expiry-1 (R defaults to expiry-1/6)", t.RenewInterval, minRenewInterval)
	}
	return nil
}

// positive lists `run`'s numeric flags whose zero would silently mean the default in the
// node's configuration: given as zero or less, they are refused.
var positiveFlags = []string{"workers", "max-submit-memory", "max-body", "max-ingest-requests", "max-ingest-memory", "max-header-bytes", "max-connections",
	"read-timeout", "read-header-timeout", "poll-interval", "unknown-answers", "unknown-grace",
	"backoff-base", "backoff-max", "retention-interval", "db-max-conns"}

// checkPositiveFlags refuses zero or negative values of positiveFlags, naming the flag.
func checkPositiveFlags(fs *flag.FlagSet) error {
	var errs []error
	for _, name := range positiveFlags {
		f := fs.Lookup(name)
		if f == nil {
			continue
		}
		var bad bool
		switch v := f.Value.(flag.Getter).Get().(type) {
		case int:
			bad = v <= 0
		case int64:
			bad = v <= 0
		case time.Duration:
			bad = v <= 0
		}
		if bad {
			errs = append(errs, fmt.Errorf("--%s %s: must be positive (default %s)", name, f.Value, f.DefValue))
		}
	}
	return errors.Join(errs...)
}

// setMemoryLimit sets the Go runtime's soft memory limit to the instance's worst-case live
// memory (node.Config.MemoryBound) plus a quarter, so that the garbage collector works
// harder near it instead of letting the heap grow to twice what is live; GOMEMLIMIT, when
// set, wins. It returns the bound and the limit in force.
func setMemoryLimit(cfg node.Config, poolConns int32) (bound, limit int64) {
	bound = cfg.MemoryBound(poolConns)
	if os.Getenv("GOMEMLIMIT") != "" {
		return bound, debug.SetMemoryLimit(-1)
	}
	limit = bound + bound/4
	debug.SetMemoryLimit(limit)
	return bound, limit
}

// defaultPoolConns is the pool size pgx picks when none is given: max(4, CPUs).
func defaultPoolConns() int { return max(4, runtime.NumCPU()) }

// readSecretFile reads a secret (a ledger Authorization value) from the file a flag names:
// its first line, trimmed. The flag is named in every error.
func readSecretFile(flagName, path string) (string, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("--%s: %w", flagName, err)
	}
	line, _, _ := strings.Cut(string(raw), "\n")
	if line = strings.TrimSpace(line); line == "" {
		return "", fmt.Errorf("--%s %s: the file is empty", flagName, path)
	}
	return line, nil
}

// givenFlags lists the flags among names that were set, as "--name".
func givenFlags(fs *flag.FlagSet, names ...string) []string {
	var out []string
	for _, n := range names {
		if flagGiven(fs, n) {
			out = append(out, "--"+n)
		}
	}
	return out
}
