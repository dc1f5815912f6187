package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"strings"

	"github.com/batchclaim/batchclaim/cmd/batchclaim/internal/cli"
)

// scenario is one scenario of `batchclaim bench`, a row of scenarios.
type scenario struct {
	name string
	// help says in one line what the scenario measures; bench --help lists it.
	help string
	// flags are the flags the scenario reads besides commonFlags, without their dashes, in
	// the order bench --help lists them. settings.define defines every flag once.
	flags []string
	// run measures the scenario with s, saying what it does on info (stderr with --json).
	run func(ctx context.Context, s *settings, info io.Writer) (result, error)
}

// result is what one scenario measured: the value --json prints as one line, and the text
// printed without --json.
type result struct {
	json  any
	print func(io.Writer)
}

// scenarios are the scenarios of `batchclaim bench`, in the order --scenario all runs them.
var scenarios = []scenario{
	{name: "jobs", help: "the job-runner path: nodes in this process, jobs stored up front, a no-op Submitter",
		flags: []string{"nodes", "workers", "conns", "keys", "per-key", "fillfactor"}, run: runJobs},
	{name: "serial", help: "the jobs scenario on one key: its jobs on one node, which runs them one at a time",
		flags: []string{"serial-jobs", "workers", "conns", "fillfactor"}, run: runSerial},
	{name: "ledger", help: "the ledger path: run's node against the ledger simulator at zero commit latency",
		flags: []string{"nodes", "workers", "conns", "keys", "per-key", "poll-interval", "fillfactor"}, run: runLedger},
	{name: "enqueue", help: "producers call ingest.Enqueue as fast as they can while nodes work: jobs per second",
		flags: []string{"producers", "producer-keys", "producer-nodes", "enqueue-duration"}, run: runEnqueue},
	{name: "bulk", help: "timed calls of ingest.EnqueueMany, no node working: seconds a call",
		flags: []string{"bulk-jobs", "bulk-runs", "bulk-without-ids", "producer-keys"}, run: runBulk},
	{name: "steady", help: "producers at a fixed rate: enqueue to start and to done, p50/p99/max per window",
		flags: []string{"steady-rate", "steady-duration", "steady-window", "steady-hold-snapshot", "producers", "producer-keys", "producer-nodes"}, run: runSteady},
	{name: "defaults", help: "two `run` processes with default flags: batches per second, /readyz probed meanwhile",
		flags: []string{"defaults-service-ids", "defaults-per-key", "defaults-run-flags", "defaults-readyz-interval", "defaults-timeout"}, run: runDefaults},
	{name: "latency", help: "idle latency of two `run` processes, enqueue to POST and to done: listening, polling",
		flags: []string{"latency-batches", "latency-service-ids", "latency-run-flags", "latency-off-flags", "latency-pause", "latency-timeout"}, run: runLatency},
	{name: "many-claims", help: "one `run` holding many claims: a batch on every key, then on the keys that sort last",
		flags: []string{"many-claims", "many-claims-last", "many-claims-timeout", "many-claims-first-timeout", "many-claims-hold-timeout", "many-claims-run-flags"}, run: runManyClaims},
	{name: "failover", help: "SIGKILL or SIGTERM an owner among `run` processes: seconds until another one POSTs",
		flags: []string{"failover-instances", "failover-service-ids", "failover-repeat", "failover-renew-interval", "failover-expiry-1", "failover-expiry-2"}, run: runFailover},
	{name: "scale", help: "`run --claims-only` processes: seconds until balanced, statements, memory",
		flags: []string{"scale-service-ids", "scale-processes", "scale-renew-interval", "scale-expiry-1", "scale-expiry-2", "scale-intervals", "scale-timeout"}, run: runScale},
	{name: "churn", help: "claim engines dropping the idle rows of many keys, beside the keys with work alone",
		flags: []string{"churn-keys", "churn-active", "churn-engines", "churn-renew-interval", "churn-drop-idle-after", "churn-chunk-size", "churn-window", "churn-drain-timeout"}, run: runChurn},
	{name: "cycle", help: "the claim cycle: instances flat out until balanced (acquire), then all held (steady)",
		flags: []string{"instances", "service-ids", "duration"}, run: runCycle},
}

// scenarioNames are the names of scenarios, in their order.
func scenarioNames() []string {
	names := make([]string, len(scenarios))
	for i, sc := range scenarios {
		names[i] = sc.name
	}
	return names
}

// choose returns the scenarios name stands for: one of them, or all of them for "all". Any
// other name is an error that lists the known ones.
func choose(name string) ([]scenario, error) {
	if name == "all" {
		return scenarios, nil
	}
	for _, sc := range scenarios {
		if sc.name == name {
			return []scenario{sc}, nil
		}
	}
	return nil, fmt.Errorf("--scenario %q: want %s or all", name, strings.Join(scenarioNames(), ", "))
}

// describe is the text bench --help prints above the flags: every scenario of scenarios with
// its help and the flags it reads.
func describe() string {
	var b strings.Builder
	b.WriteString("Measures batchclaim on scratch databases (DATABASE_URL, else a throwaway local cluster).\n\n")
	b.WriteString("Scenarios (--scenario all runs every one, in this order):\n")
	width := 0
	for _, sc := range scenarios {
		width = max(width, len(sc.name))
	}
	indent := strings.Repeat(" ", 2+width+2)
	for _, sc := range scenarios {
		fmt.Fprintf(&b, "  %-*s  %s\n", width, sc.name, sc.help)
		line := indent + "flags:"
		for _, f := range sc.flags {
			if len(line)+len(" --"+f) > 100 {
				b.WriteString(line + "\n")
				line = indent + "      "
			}
			line += " --" + f
		}
		b.WriteString(line + "\n")
	}
	b.WriteString("\nEvery scenario reads --json, --keep, --cpu-profile and --alloc-profile. --json prints one\n")
	b.WriteString("object per line, each with a \"scenario\" field; everything else goes to stderr. See\n")
	b.WriteString("docs/performance.md.")
	return b.String()
}

// Command is `batchclaim bench`: it measures the scenarios args choose, each on scratch
// databases, and writes the results to stdout (one JSON object a line with --json).
func Command(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("bench", "[--scenario "+strings.Join(scenarioNames(), "|")+"|all] [--json] [flags]", describe(), stderr)
	var s settings
	s.define(fs)
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if s.cpuProfile != "" {
		f, err := os.Create(s.cpuProfile)
		if err != nil {
			return fmt.Errorf("--cpu-profile: %v", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("--cpu-profile: %v", err)
		}
		defer pprof.StopCPUProfile()
	}
	if s.allocProfile != "" {
		f, err := os.Create(s.allocProfile)
		if err != nil {
			return fmt.Errorf("--alloc-profile: %v", err)
		}
		defer f.Close()
		defer func() {
			if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
				fmt.Fprintf(stderr, "--alloc-profile: %v\n", err)
			}
		}()
	}
	run, err := choose(s.scenario)
	if err != nil {
		return err
	}
	if err := s.check(); err != nil {
		return err
	}
	// The scratch database's name goes to stderr with --json, so that stdout is only JSON.
	info := stdout
	if s.asJSON {
		info = stderr
	}
	enc := json.NewEncoder(stdout)
	enc.SetEscapeHTML(false)
	for _, sc := range run {
		r, err := sc.run(ctx, &s, info)
		if err != nil {
			return fmt.Errorf("%s: %w", sc.name, err)
		}
		if !s.asJSON {
			r.print(stdout)
			continue
		}
		if err := enc.Encode(r.json); err != nil {
			return err
		}
	}
	return nil
}

// measured is the result of a scenario whose measured value is itself the JSON line and
// prints its own text.
func measured[R interface{ print(io.Writer) }](r R, err error) (result, error) {
	return result{json: r, print: r.print}, err
}

func runJobs(ctx context.Context, s *settings, info io.Writer) (result, error) {
	c := s.path
	c.keep = s.keep
	r, err := benchJobs(ctx, c, info)
	if err != nil {
		return result{}, err
	}
	return result{json: r.jobsJSON(), print: func(w io.Writer) { r.print(w, "jobs", "job", "jobs", "") }}, nil
}

func runSerial(ctx context.Context, s *settings, info io.Writer) (result, error) {
	c := pathConfig{nodes: 1, conns: s.path.conns, keys: 1, perKey: s.serialJobs, workers: s.path.workers, fillfactor: s.path.fillfactor, keep: s.keep}
	r, err := benchJobs(ctx, c, info)
	if err != nil {
		return result{}, err
	}
	return result{json: r.serialJSON(), print: func(w io.Writer) { r.print(w, "serial", "job", "jobs", ", one key") }}, nil
}

func runLedger(ctx context.Context, s *settings, info io.Writer) (result, error) {
	c := s.path
	c.keep = s.keep
	r, err := benchLedger(ctx, c, info)
	if err != nil {
		return result{}, err
	}
	extra := fmt.Sprintf(", simulator at zero latency, poll interval %s", c.pollInterval)
	return result{json: r.ledgerJSON(c.pollInterval), print: func(w io.Writer) { r.print(w, "ledger", "batch", "batches", extra) }}, nil
}

func runEnqueue(ctx context.Context, s *settings, info io.Writer) (result, error) {
	c := s.producer
	c.duration, c.keep = s.enqueueFor, s.keep
	return measured(benchEnqueue(ctx, c, info))
}

func runBulk(ctx context.Context, s *settings, info io.Writer) (result, error) {
	c := s.producer
	c.keep = s.keep
	return measured(benchBulk(ctx, c, info))
}

func runSteady(ctx context.Context, s *settings, info io.Writer) (result, error) {
	c := s.producer
	c.duration, c.keep = s.steadyFor, s.keep
	return measured(benchSteady(ctx, c, info))
}

func runDefaults(ctx context.Context, s *settings, info io.Writer) (result, error) {
	c := s.defaults
	c.runFlags, c.keep = strings.Fields(s.defaultsRunFlags), s.keep
	return measured(benchDefaults(ctx, c, info))
}

func runLatency(ctx context.Context, s *settings, info io.Writer) (result, error) {
	c := s.latency
	c.runFlags, c.offFlags, c.keep = strings.Fields(s.latencyRunFlags), strings.Fields(s.latencyOffFlags), s.keep
	return measured(benchLatency(ctx, c, info))
}

func runManyClaims(ctx context.Context, s *settings, info io.Writer) (result, error) {
	c := s.manyClaims
	c.runFlags, c.keep = strings.Fields(s.manyClaimsRunFlags), s.keep
	return measured(benchManyClaims(ctx, c, info))
}

func runFailover(ctx context.Context, s *settings, info io.Writer) (result, error) {
	c := s.failover
	c.keep = s.keep
	return measured(benchFailover(ctx, c, info))
}

func runScale(ctx context.Context, s *settings, info io.Writer) (result, error) {
	c := s.scale
	c.keep = s.keep
	return measured(benchScale(ctx, c, info))
}

func runChurn(ctx context.Context, s *settings, info io.Writer) (result, error) {
	c := s.churn
	c.keep = s.keep
	return measured(benchChurn(ctx, c, info))
}

func runCycle(ctx context.Context, s *settings, info io.Writer) (result, error) {
	c := s.cycle
	var r cycleResult
	if err := benchCycle(ctx, c.instances, c.serviceIDs, c.duration, s.keep, info, &r); err != nil {
		return result{}, err
	}
	return result{json: r.json(), print: r.print}, nil
}
