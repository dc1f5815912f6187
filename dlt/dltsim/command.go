package dltsim

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"reflect"
	"strings"
	"time"

	"github.com/batchclaim/batchclaim/dlt"
	"github.com/batchclaim/batchclaim/httpguard"
)

const commandUsage = `Usage: batchclaim dlt-sim [flags]

Runs a simulated ledger API (the Sawtooth REST API or a Splinter scabbard service) until
interrupted. It prints the base URL it listens on as the first line of standard output: the
REST API root for sawtooth, the node URL for scabbard (whose service lives under
/scabbard/CIRCUIT/SERVICE). Logs go to standard error.

An admin API on the same address drives the simulation:
  GET  /_sim/posts                  every POST received (JSON)
  GET  /_sim/committed              committed batch ids in commit order (JSON)
  POST /_sim/restart                forget pending and invalid batches (scabbard: all history)
  POST /_sim/inject?status=503&n=3  the next n POSTs answer the status
  POST /_sim/inject?timeout=2s&n=1  the next n POSTs get no answer and are not accepted
  POST /_sim/inject?drop=1          the next POSTs take effect but get no answer
  POST /_sim/inject?status=503&code=17&n=1  503 "may or may not have been processed" (it was)
  POST /_sim/inject?clear=true      cancel the injected faults still to come
  GET  /_sim/settled                batches committed or INVALID, in order (JSON)
  POST /_sim/pause?on=true|false    stop or resume committing
  POST /_sim/commit?n=N             commit the next N queued batches now

Flags:
`

// Command runs `batchclaim dlt-sim` until ctx ends. Flag errors come back as one-line errors
// for the caller to print; -h prints the usage on stdout and returns nil.
func Command(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, opts := commandFlags()
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printUsage(fs, stdout)
			return nil
		}
		return fmt.Errorf("dlt-sim: %w", err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("dlt-sim: unexpected argument %q (see -h)", fs.Arg(0))
	}
	if opts.failStatus < 400 || opts.failStatus > 599 {
		return fmt.Errorf("dlt-sim: --fail-status must be an HTTP error status (400-599), got %d", opts.failStatus)
	}
	if err := checkBounds(fs); err != nil {
		return fmt.Errorf("dlt-sim: %w", err)
	}
	opts.cfg.Logger = slog.New(slog.NewTextHandler(stderr, nil))
	sim, err := New(opts.cfg)
	if err != nil {
		return fmt.Errorf("dlt-sim: %w", err)
	}
	baseURL, err := sim.Start(opts.listen)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, baseURL)
	opts.cfg.Logger.Info("dlt-sim listening", "flavor", string(sim.Flavor()), "url", baseURL)
	if !httpguard.LoopbackOnly(opts.listen) {
		opts.cfg.Logger.Warn("dlt-sim: --listen is not a loopback address: its admin API (/_sim/...: restart, inject failures, pause, commit) "+
			"takes requests from anyone who can reach it, without authentication; keep it on a private network", "listen", opts.listen)
	}
	if opts.failCount > 0 {
		sim.InjectStatus(opts.failStatus, opts.failCount)
	}
	if opts.timeouts > 0 {
		sim.InjectTimeouts(opts.timeouts, opts.timeoutHold)
	}
	if opts.drops > 0 {
		sim.InjectDroppedResponses(opts.drops)
	}
	if opts.restartEvery > 0 {
		go restartEvery(ctx, sim, opts.restartEvery)
	}
	<-ctx.Done()
	if err := sim.Close(); err != nil {
		return fmt.Errorf("dlt-sim: close: %w", err)
	}
	if opts.postLog != "" {
		return writePostLog(opts.postLog, sim.Posts())
	}
	return nil
}

type commandOptions struct {
	cfg     Config
	listen  string
	postLog string

	failStatus, failCount int           // the first failCount POSTs answer failStatus
	timeouts              int           // then this many POSTs are held without an answer...
	timeoutHold           time.Duration // ...for this long
	drops                 int           // and this many take effect but lose their answer
	restartEvery          time.Duration // restart (forget everything uncommitted) this often
}

func commandFlags() (*flag.FlagSet, *commandOptions) {
	o := &commandOptions{cfg: Config{Flavor: dlt.FlavorSawtooth}}
	fs := flag.NewFlagSet("dlt-sim", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c := &o.cfg
	fs.Func("flavor", "ledger API: sawtooth or scabbard (default sawtooth)", func(v string) error {
		f, err := dlt.ParseFlavor(v)
		c.Flavor = f
		return err
	})
	fs.StringVar(&o.listen, "listen", "127.0.0.1:0", "address to listen on (port 0 picks a free one)")
	fs.Func("allowed-hosts", "comma-separated host names the listener answers to besides IP addresses, localhost and the --listen host "+
		"(.example.com: a domain and its subdomains); other Host headers get 421, a defence against DNS rebinding", func(v string) error {
		for _, h := range strings.Split(v, ",") {
			if h = strings.TrimSpace(h); h != "" {
				c.AllowedHosts = append(c.AllowedHosts, h)
			}
		}
		return nil
	})
	fs.StringVar(&c.Circuit, "circuit", CircuitDefault, "scabbard circuit id")
	fs.StringVar(&c.Service, "service", ServiceDefault, "scabbard service id")
	fs.StringVar(&c.Authorization, "authorization", "", "require this Authorization header value")
	fs.DurationVar(&c.CommitLatency, "commit-latency", 0, "time from arrival to commit (0: at the next request)")
	fs.Float64Var(&c.InvalidRate, "invalid-rate", 0, "fraction 0..1 of batches that come out INVALID")
	fs.IntVar(&c.QueueHigh, "queue-high", 0, "queued batches at which POSTs get 429 (0: sawtooth 100, scabbard 30)")
	fs.IntVar(&c.QueueLow, "queue-low", 0, "queued batches below which POSTs are accepted again (0: sawtooth 50, scabbard 15, or queue-high/2)")
	fs.IntVar(&c.HistoryLimit, "history", 0, "scabbard history size (0: 100, negative: unlimited)")
	fs.DurationVar(&c.InvalidMemory, "invalid-memory", 0, "how long sawtooth remembers INVALID (0: 600s)")
	fs.DurationVar(&c.RetryAfter, "retry-after", 0, "Retry-After sent with 429 and 503 (0: none)")
	fs.Int64Var(&c.Seed, "seed", 0, "seed choosing the INVALID batches")
	fs.StringVar(&o.postLog, "post-log", "", "write the POST log to this file as JSON lines on exit")
	fs.IntVar(&o.failStatus, "fail-status", 503, "HTTP status of the injected failures of --fail-count")
	fs.IntVar(&o.failCount, "fail-count", 0, "answer the first N POSTs with --fail-status (not accepted)")
	fs.IntVar(&o.timeouts, "timeouts", 0, "hold N POSTs without an answer (not accepted) for --timeout-hold")
	fs.DurationVar(&o.timeoutHold, "timeout-hold", 30*time.Second, "how long a --timeouts POST is held")
	fs.IntVar(&o.drops, "drop-responses", 0, "accept N POSTs but close the connection without answering")
	fs.DurationVar(&o.restartEvery, "restart-every", 0, "restart the ledger this often: PENDING (and for scabbard all history) is forgotten (0: never)")
	return fs, o
}

func printUsage(fs *flag.FlagSet, w io.Writer) {
	var b strings.Builder
	b.WriteString(commandUsage)
	fs.SetOutput(&b)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
	fmt.Fprint(w, b.String())
}

func restartEvery(ctx context.Context, sim *Sim, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			sim.Restart()
		}
	}
}

// writePostLog writes posts as JSON lines.
func writePostLog(path string, posts []Post) (err error) {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("dlt-sim: post log: %w", err)
	}
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("dlt-sim: post log: %w", cerr)
		}
	}()
	bw := bufio.NewWriter(f)
	enc := json.NewEncoder(bw)
	for _, p := range posts {
		if err := enc.Encode(p); err != nil {
			return fmt.Errorf("dlt-sim: post log: %w", err)
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("dlt-sim: post log: %w", err)
	}
	return nil
}

// Bounds of dlt-sim's numeric flags, both ends included: a value outside them is a typo,
// not a simulation. --fail-status has its own check; --seed takes any int64.
var (
	countBounds = map[string][2]int64{"queue-high": {0, 1_000_000}, "queue-low": {0, 1_000_000}, "history": {math.MinInt64, 10_000_000},
		"fail-count": {0, 1_000_000}, "timeouts": {0, 1_000_000}, "drop-responses": {0, 1_000_000}, "seed": {math.MinInt64, math.MaxInt64}, "fail-status": {400, 599}}
	durationBounds = map[string][2]time.Duration{"commit-latency": {0, 24 * time.Hour}, "invalid-memory": {0, 24 * time.Hour},
		"retry-after": {0, 24 * time.Hour}, "timeout-hold": {1, 24 * time.Hour}, "restart-every": {0, 24 * time.Hour}}
	floatBounds = map[string][2]float64{"invalid-rate": {0, 1}}
)

// checkBounds refuses a numeric flag given outside its bounds, naming it. A numeric flag
// without bounds is refused too: a new flag must say its own.
func checkBounds(fs *flag.FlagSet) error {
	var errs []error
	out := func(f *flag.Flag, lo, hi any) {
		errs = append(errs, fmt.Errorf("--%s %s: want %v to %v", f.Name, f.Value, lo, hi))
	}
	fs.Visit(func(f *flag.Flag) {
		g, ok := f.Value.(flag.Getter)
		if !ok {
			return // a flag.Func: not a number
		}
		switch v := g.Get().(type) {
		case int, int64:
			n := reflect.ValueOf(v).Int()
			b, ok := countBounds[f.Name]
			if !ok || n < b[0] || n > b[1] {
				out(f, b[0], b[1])
			}
		case time.Duration:
			b, ok := durationBounds[f.Name]
			if !ok || v < b[0] || v > b[1] {
				out(f, b[0], b[1])
			}
		case float64:
			b, ok := floatBounds[f.Name]
			if !ok || !(v >= b[0] && v <= b[1]) {
				out(f, b[0], b[1])
			}
		}
	})
	return errors.Join(errs...)
}
