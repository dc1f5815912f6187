package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"time"

	"github.com/batchclaim/batchclaim/claims"
	"github.com/batchclaim/batchclaim/cmd/batchclaim/internal/cli"
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
// them (their bounds, each within (0, 24h], are runBounds'): expiry-1 and renew-interval
// above their floors.
func checkTimingFlags(fs *flag.FlagSet) error {
	var errs []error
	for _, name := range timingFlagNames {
		if !flagGiven(fs, name) {
			continue
		}
		d := fs.Lookup(name).Value.(flag.Getter).Get().(time.Duration)
		switch {
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

// Bounds of run's numeric flags (cli.Bound): a value outside them stops run at start with a
// line naming the flag. The upper ones keep the memory bound (node.Config.MemoryBound) and
// the work of one instance within what one machine and one Postgres server hold: a pool of
// 100,000 connections, or 10^11 workers, is a typo.
const (
	maxDBConns     = 1000     // per instance; Postgres's own max_connections is 100 by default
	maxWorkers     = 100_000  // concurrent submissions, at most one per service_id
	maxConnections = 100_000  // open connections to the listener
	maxRequests    = 100_000  // ingest requests worked on at once
	maxBody        = 1 << 30  // 1 GiB: one ingest body (a Sawtooth REST API takes 10 MiB)
	maxMemory      = 64 << 30 // 64 GiB: the ingest and the submissions' memory bounds
	maxRetention   = 10 * 365 * 24 * time.Hour
)

// runBounds declares the bounds of run's numeric flags.
func runBounds(fs *flag.FlagSet) {
	for _, name := range timingFlagNames { // 0 (unset) means derived; given, within (0, 24h]
		cli.BoundDuration(fs, name, 1, maxTiming, "")
	}
	cli.Bound(fs, "share-slack", 0, 1_000_000, "")
	cli.BoundDuration(fs, "drop-idle-after", 0, maxRetention, "0: never")
	cli.BoundDuration(fs, "read-timeout", 1, maxTiming, "")
	cli.BoundDuration(fs, "read-header-timeout", 1, maxTiming, "")
	cli.Bound(fs, "max-header-bytes", 4<<10, 1<<20, "a header block holds the bearer token and the request line; net/http's own limit is 1 MiB")
	cli.Bound(fs, "max-connections", 1, maxConnections, "")
	cli.Bound(fs, "max-ingest-requests", 1, maxRequests, "")
	cli.Bound(fs, "max-ingest-memory", 1, maxMemory, "")
	cli.Bound(fs, "db-max-conns", 2, maxDBConns, "ingest may hold half of them, the work needs the rest")
	cli.Bound(fs, "workers", 1, maxWorkers, "")
	cli.Bound(fs, "max-submit-memory", 1, maxMemory, "")
	cli.BoundDuration(fs, "poll-interval", 10*time.Millisecond, maxTiming, "each poll asks the ledger about every accepted batch")
	cli.BoundDuration(fs, "unknown-grace", 1, maxTiming, "")
	cli.Bound(fs, "unknown-answers", 1, 1_000_000, "")
	cli.BoundDuration(fs, "backoff-base", 1, maxTiming, "")
	cli.BoundDuration(fs, "backoff-max", 1, maxTiming, "")
	cli.BoundDuration(fs, "retention", 0, maxRetention, "0 disables")
	cli.BoundDuration(fs, "retention-interval", 10*time.Millisecond, maxTiming, "")
	cli.Bound(fs, "max-body", 1, maxBody, "")
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
