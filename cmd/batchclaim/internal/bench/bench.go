package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batchclaim/batchclaim/claims"
	"github.com/batchclaim/batchclaim/cmd/batchclaim/internal/cli"
	"github.com/batchclaim/batchclaim/cmd/batchclaim/internal/database"
	"github.com/batchclaim/batchclaim/pgdb"
	"github.com/batchclaim/batchclaim/submitter"
)

// benchPhase is what one phase of `batchclaim bench` measured.
type benchPhase struct {
	Name            string  `json:"name"`
	Seconds         float64 `json:"seconds"`
	Cycles          int64   `json:"cycles"`
	CyclesPerSecond float64 `json:"cycles_per_second"`
	Retries         int64   `json:"serialization_retries"`
	RetryPercent    float64 `json:"retry_percent"`
	GiveUps         int64   `json:"give_ups"`
	P50Millis       float64 `json:"cycle_p50_ms"`
	P99Millis       float64 `json:"cycle_p99_ms"`
	OwnerChanges    int64   `json:"ownership_changes"`
}

// benchTotals are the tables' row-update counters over the whole run, read after every
// instance disconnected (Postgres reports a session's counters when it ends at the latest).
type benchTotals struct {
	ClaimRowUpdates    int64 `json:"claim_row_updates"`
	InstanceRowUpdates int64 `json:"instance_row_updates"`
	OwnerChanges       int64 `json:"ownership_changes"`
	Cycles             int64 `json:"cycles"`
}

// benchScenarios are the scenarios of `batchclaim bench`, in the order `all` runs them.
var benchScenarios = []string{"jobs", "serial", "ledger", "enqueue", "bulk", "steady", "defaults", "latency", "many-claims", "failover", "scale", "churn", "cycle"}

// Command is `batchclaim bench`: it measures the scenarios args choose, each on scratch
// databases, and writes the results to stdout (one JSON object a line with --json).
func Command(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("bench", "[--scenario jobs|serial|ledger|enqueue|bulk|steady|defaults|latency|many-claims|failover|scale|churn|cycle|all] [--json] [flags]",
		"Measures batchclaim on scratch databases (DATABASE_URL, else a throwaway local cluster):\n\n"+
			"  jobs      the job-runner path: --nodes nodes in this process, --keys x --per-key jobs stored\n"+
			"            up front, a Submitter that does nothing. Jobs per second, stored-to-done latency,\n"+
			"            statements per job (counted by the client) and commits per job (pg_stat_database).\n"+
			"  serial    the jobs scenario on one key: --serial-jobs jobs of one service_id, one node, which\n"+
			"            runs them one at a time. Jobs per second, statements and commits per job.\n"+
			"  ledger    the ledger path: the node `batchclaim run` runs, against the ledger simulator at\n"+
			"            zero commit latency. Batches per second, latency, statements and commits per batch.\n"+
			"  enqueue   --producers goroutines call ingest.Enqueue (one job a call) as fast as they can for\n"+
			"            --enqueue-duration over --producer-keys keys, on a pool of their own, while --producer-nodes\n"+
			"            nodes with run's defaults (a Submitter that does nothing) work: jobs enqueued per second.\n"+
			"  bulk      --bulk-runs calls of ingest.EnqueueMany, --bulk-jobs jobs each over --producer-keys keys,\n"+
			"            no node working: seconds a call.\n"+
			"  steady    the same producers at a fixed --steady-rate for --steady-duration: enqueue to start and\n"+
			"            to done, p50/p99/max per --steady-window of arrival.\n"+
			"  defaults  two `batchclaim run` processes with default flags against the simulator at zero\n"+
			"            latency, --defaults-service-ids x --defaults-per-key batches stored once they hold the\n"+
			"            claims: batches per second, and /readyz of both probed every\n"+
			"            --defaults-readyz-interval meanwhile (non-200 answers, probes unanswered in 1s).\n"+
			"  latency   an idle system: two `batchclaim run` processes with default flags, --latency-batches\n"+
			"            single batches POSTed one at a time to either instance over --latency-service-ids\n"+
			"            service_ids. Enqueue to first POST and to COMMITTED, p50/p99 (database clock), run\n"+
			"            twice: as run starts (listening for new work, where run does) and with\n"+
			"            --latency-off-flags added (passed only if run has them). A pause drawn from\n"+
			"            [0, R) before each POST spreads the arrivals over the queuer's fetch interval R\n"+
			"            (5s by default): a run takes about batches x R, 3-4 minutes each while it polls.\n"+
			"  many-claims  one `batchclaim run` (default flags) holding --many-claims claims: one batch on\n"+
			"            every key, waited for, then one on each of the --many-claims-last keys that sort last:\n"+
			"            how many were submitted within --many-claims-timeout, enqueue to POST p50/p99.\n"+
			"  failover  `batchclaim run` processes against the ledger simulator: SIGKILL an idle owner,\n"+
			"            SIGKILL an owner with a POST in flight, SIGTERM an owner; seconds from the fault to\n"+
			"            the orphaned service_id's next POST by another instance (database clock), beside\n"+
			"            the targets T1 + 2R, T2 + 2R and 2R. About a minute.\n"+
			"  scale     --scale-processes `batchclaim run --claims-only` processes over --scale-service-ids:\n"+
			"            seconds until balanced, self-fencings, statements per instance per renew interval\n"+
			"            once balanced (batchclaim_db_statements_total), resident memory per process.\n"+
			"  churn     claim engines (Engine.Run) in this process over --churn-active keys with work:\n"+
			"            those alone, without and with dropping idle claim rows, then among --churn-keys keys\n"+
			"            ever seen whose idle rows the engines drop (--churn-drop-idle-after). Seconds until\n"+
			"            only the keys with work have rows (at most --churn-drain-timeout); cycle latency and\n"+
			"            statements per instance per renew interval of the three, side by side.\n"+
			"  cycle     the claim cycle: --instances instances cycle flat out over --service-ids, first\n"+
			"            until the claims are balanced (acquire), then with everything held (steady).\n"+
			"            Cycles per second, serialization retries, cycle latency, row updates.\n\n"+
			"--json prints one object per line, each with a \"scenario\" field; everything else goes to\n"+
			"stderr. See docs/performance.md.", stderr)
	scenario := fs.String("scenario", "all", "jobs | serial | ledger | enqueue | bulk | steady | defaults | latency | many-claims | failover | scale | churn | cycle | all")
	asJSON := fs.Bool("json", false, "print one JSON object per scenario, one a line")
	keep := fs.Bool("keep", false, "keep the scratch databases (and the failover and scale instance logs)")
	nodes := fs.Int("nodes", 2, "jobs, ledger: nodes, each with its own pool")
	workers := fs.Int("workers", submitter.WorkersDefault, "jobs, ledger: workers (concurrent submissions) per node (default: run's)")
	conns := fs.Int("conns", 0, "jobs, ledger: database connections per node (0: pgx's default, max(4, CPUs), as batchclaim run uses)")
	keys := fs.Int("keys", 1000, "jobs, ledger: keys (service_ids)")
	perKey := fs.Int("per-key", 10, "jobs, ledger: jobs (batches) per key")
	poll := fs.Duration("poll-interval", time.Second, "ledger: how often each node asks the ledger about accepted batches")
	serialJobs := fs.Int("serial-jobs", 2000, "serial: jobs of the one key")
	var pr producerConfig
	fs.IntVar(&pr.producers, "producers", 16, "enqueue, steady: goroutines that enqueue, on a pool of their own (one connection each)")
	fs.IntVar(&pr.keys, "producer-keys", 1000, "enqueue, steady: keys (service_ids) the jobs go to, in turn")
	fs.IntVar(&pr.nodes, "producer-nodes", 2, "enqueue, steady: nodes working the jobs off, with run's defaults")
	enqueueFor := fs.Duration("enqueue-duration", 20*time.Second, "enqueue: how long the producers run")
	fs.Float64Var(&pr.rate, "steady-rate", 600, "steady: jobs per second asked for")
	steadyFor := fs.Duration("steady-duration", time.Minute, "steady: how long the producers run")
	fs.IntVar(&pr.bulkJobs, "bulk-jobs", 10000, "bulk: jobs of one EnqueueMany call")
	fs.IntVar(&pr.bulkRuns, "bulk-runs", 5, "bulk: calls, each timed")
	fs.DurationVar(&pr.window, "steady-window", 10*time.Second, "steady: latencies are reported per window of this length")
	var lc latencyConfig
	fs.IntVar(&lc.batches, "latency-batches", 40, "latency: batches POSTed one at a time, in each of the two runs")
	fs.IntVar(&lc.serviceIDs, "latency-service-ids", 10, "latency: service_ids the batches go to, in turn")
	latencyRunFlags := fs.String("latency-run-flags", "", "latency: more flags for every `run` process of both runs, space-separated")
	latencyOffFlags := fs.String("latency-off-flags", "--notify=false", "latency: flags that turn listening off, added in the second run when `run --help` lists them")
	fs.DurationVar(&lc.gap, "latency-pause", 0, "latency: pauses before each POST are drawn from [0, this), so that batches arrive at any point of a periodic fetch (0: the processes' renew interval)")
	fs.DurationVar(&lc.limit, "latency-timeout", time.Minute, "latency: longest wait for one batch's POST or its end")
	var dc defaultsConfig
	fs.IntVar(&dc.serviceIDs, "defaults-service-ids", 1000, "defaults: service_ids")
	fs.IntVar(&dc.perKey, "defaults-per-key", 20, "defaults: batches per service_id")
	defaultsRunFlags := fs.String("defaults-run-flags", "", "defaults: more flags for both `run` processes, space-separated (e.g. \"--workers 500\")")
	fs.DurationVar(&dc.readyzEvery, "defaults-readyz-interval", 100*time.Millisecond, "defaults: how often each process's /readyz is probed")
	fs.DurationVar(&dc.limit, "defaults-timeout", 10*time.Minute, "defaults: give up when the batches are not all committed by then")
	var mc manyClaimsConfig
	fs.IntVar(&mc.claims, "many-claims", 2000, "many-claims: service_ids, all held by the one process (e.g. 100000)")
	fs.IntVar(&mc.last, "many-claims-last", 500, "many-claims: keys, those that sort last, given a second batch")
	fs.DurationVar(&mc.limit, "many-claims-timeout", time.Minute, "many-claims: how long the second batches are waited for")
	fs.DurationVar(&mc.firstLimit, "many-claims-first-timeout", 10*time.Minute, "many-claims: how long the first round is waited for")
	fs.DurationVar(&mc.claimLimit, "many-claims-hold-timeout", 10*time.Minute, "many-claims: give up when the process does not hold every claim by then")
	manyClaimsRunFlags := fs.String("many-claims-run-flags", "", "many-claims: more flags for the `run` process, space-separated")
	var fo failoverConfig
	fs.IntVar(&fo.instances, "failover-instances", 3, "failover: run processes (at least 2)")
	fs.IntVar(&fo.serviceIDs, "failover-service-ids", 30, "failover: service_ids")
	fs.IntVar(&fo.repeat, "failover-repeat", 3, "failover: faults of each kind")
	fs.DurationVar(&fo.renew, "failover-renew-interval", time.Second, "failover: the processes' --renew-interval R")
	fs.DurationVar(&fo.expiry1, "failover-expiry-1", 4*time.Second, "failover: the processes' --expiry-1 T1")
	fs.DurationVar(&fo.expiry2, "failover-expiry-2", 8*time.Second, "failover: the processes' --expiry-2 T2")
	var sc scaleConfig
	fs.IntVar(&sc.serviceIDs, "scale-service-ids", 100000, "scale: service_ids")
	fs.IntVar(&sc.processes, "scale-processes", 32, "scale: run --claims-only processes, started together")
	fs.DurationVar(&sc.renew, "scale-renew-interval", time.Second, "scale: the processes' --renew-interval R")
	fs.DurationVar(&sc.expiry1, "scale-expiry-1", 6*time.Second, "scale: the processes' --expiry-1 T1")
	fs.DurationVar(&sc.expiry2, "scale-expiry-2", 24*time.Second, "scale: the processes' --expiry-2 T2")
	fs.IntVar(&sc.intervals, "scale-intervals", 10, "scale: renew intervals over which the statements of balanced instances are counted")
	fs.DurationVar(&sc.limit, "scale-timeout", 100*time.Second, "scale: give up when the claims are not balanced by then")
	var ch churnConfig
	fs.IntVar(&ch.keys, "churn-keys", 1000000, "churn: keys ever seen (claim rows at the start)")
	fs.IntVar(&ch.active, "churn-active", 1000, "churn: keys with work (one unfinished batch each)")
	fs.IntVar(&ch.engines, "churn-engines", 4, "churn: claim engines, each with its own pool")
	fs.DurationVar(&ch.renew, "churn-renew-interval", time.Second, "churn: the engines' renew interval R (expiry-1 6R, expiry-2 24R)")
	fs.DurationVar(&ch.dropIdle, "churn-drop-idle-after", 2*time.Second, "churn: the engines' DropIdleAfter")
	fs.IntVar(&ch.chunk, "churn-chunk-size", 0, "churn: the engines' ChunkSize, rows per void, acquire or drop statement (0: the engine's default, 1000)")
	fs.DurationVar(&ch.window, "churn-window", 10*time.Second, "churn: how long cycles and statements are measured once balanced")
	fs.DurationVar(&ch.drainLimit, "churn-drain-timeout", 120*time.Second, "churn: stop waiting for the idle rows to be dropped after this long, and measure while they are (4 engines dropped 1,000,000 rows in about a minute on 2 cores)")
	instances := fs.Int("instances", 8, "cycle: instances cycling concurrently")
	serviceIDs := fs.Int("service-ids", 2000, "cycle: service_ids")
	duration := fs.Duration("duration", 10*time.Second, "cycle: length of the steady phase")
	cpuProfile := fs.String("cpu-profile", "", "write a CPU profile of this process over the scenarios to this file (go tool pprof)")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return fmt.Errorf("--cpu-profile: %v", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("--cpu-profile: %v", err)
		}
		defer pprof.StopCPUProfile()
	}
	var run []string
	switch *scenario {
	case "all":
		run = benchScenarios
	default:
		if !slices.Contains(benchScenarios, *scenario) {
			return fmt.Errorf("--scenario %q: want jobs, serial, ledger, enqueue, bulk, steady, defaults, latency, many-claims, failover, scale, churn, cycle or all", *scenario)
		}
		run = []string{*scenario}
	}
	if *nodes < 1 || *workers < 1 || *keys < 1 || *perKey < 1 || *poll <= 0 || *conns < 0 {
		return fmt.Errorf("--nodes, --workers, --keys and --per-key must be at least 1, --conns not negative, --poll-interval positive")
	}
	if *instances < 1 || *serviceIDs < 1 || *duration <= 0 {
		return fmt.Errorf("--instances and --service-ids must be at least 1, --duration positive")
	}
	if *serialJobs < 1 {
		return fmt.Errorf("--serial-jobs must be at least 1")
	}
	if lc.batches < 1 || lc.serviceIDs < 1 || lc.limit <= 0 || lc.gap < 0 {
		return fmt.Errorf("--latency-batches and --latency-service-ids must be at least 1, --latency-timeout positive, --latency-pause not negative")
	}
	if dc.serviceIDs < 1 || dc.perKey < 1 || dc.readyzEvery <= 0 || dc.limit <= 0 {
		return fmt.Errorf("--defaults-service-ids and --defaults-per-key must be at least 1, --defaults-readyz-interval and --defaults-timeout positive")
	}
	if mc.claims < 1 || mc.last < 1 || mc.last > mc.claims || mc.limit <= 0 || mc.firstLimit <= 0 || mc.claimLimit <= 0 {
		return fmt.Errorf("--many-claims and --many-claims-last must be at least 1, --many-claims-last at most --many-claims, the --many-claims durations positive")
	}
	if pr.producers < 1 || pr.keys < 1 || pr.nodes < 1 || pr.bulkJobs < 1 || pr.bulkRuns < 1 || *enqueueFor <= 0 || *steadyFor <= 0 || pr.rate <= 0 || pr.window <= 0 {
		return fmt.Errorf("--producers, --producer-keys, --producer-nodes, --bulk-jobs and --bulk-runs must be at least 1, --enqueue-duration, --steady-duration, --steady-rate and --steady-window positive")
	}
	lc.runFlags, lc.offFlags = strings.Fields(*latencyRunFlags), strings.Fields(*latencyOffFlags)
	dc.runFlags, mc.runFlags = strings.Fields(*defaultsRunFlags), strings.Fields(*manyClaimsRunFlags)
	if fo.instances < 2 || fo.serviceIDs < fo.instances || fo.repeat < 1 {
		return fmt.Errorf("--failover-instances must be at least 2, --failover-service-ids at least --failover-instances, --failover-repeat at least 1")
	}
	if sc.processes < 1 || sc.serviceIDs < 1 || sc.intervals < 1 || sc.limit <= 0 {
		return fmt.Errorf("--scale-processes, --scale-service-ids and --scale-intervals must be at least 1, --scale-timeout positive")
	}
	if ch.engines < 1 || ch.active < 1 || ch.keys < ch.active || ch.renew <= 0 || ch.dropIdle <= 0 || ch.chunk < 0 || ch.window <= 0 || ch.drainLimit <= 0 {
		return fmt.Errorf("--churn-engines and --churn-active must be at least 1, --churn-keys at least --churn-active, --churn-chunk-size not negative, the --churn durations positive")
	}
	// The scratch database's name goes to stderr with --json, so that stdout is only JSON.
	info := stdout
	if *asJSON {
		info = stderr
	}
	pr.keep = *keep
	fo.keep, sc.keep, ch.keep, lc.keep, dc.keep, mc.keep = *keep, *keep, *keep, *keep, *keep, *keep
	pc := pathConfig{nodes: *nodes, conns: *conns, keys: *keys, perKey: *perKey, workers: *workers, pollInterval: *poll, keep: *keep}
	enc := json.NewEncoder(stdout)
	enc.SetEscapeHTML(false)
	for _, s := range run {
		switch s {
		case "jobs":
			r, err := benchJobs(ctx, pc, info)
			if err != nil {
				return fmt.Errorf("jobs: %w", err)
			}
			if *asJSON {
				if err := enc.Encode(r.jobsJSON()); err != nil {
					return err
				}
				continue
			}
			r.print(stdout, "jobs", "job", "jobs", "")
		case "serial":
			sp := pathConfig{nodes: 1, conns: *conns, keys: 1, perKey: *serialJobs, workers: *workers, keep: *keep}
			r, err := benchJobs(ctx, sp, info)
			if err != nil {
				return fmt.Errorf("serial: %w", err)
			}
			if *asJSON {
				if err := enc.Encode(r.serialJSON()); err != nil {
					return err
				}
				continue
			}
			r.print(stdout, "serial", "job", "jobs", ", one key")
		case "enqueue":
			c := pr
			c.duration = *enqueueFor
			r, err := benchEnqueue(ctx, c, info)
			if err != nil {
				return fmt.Errorf("enqueue: %w", err)
			}
			if err := emit(enc, *asJSON, r, r.print, stdout); err != nil {
				return err
			}
		case "bulk":
			r, err := benchBulk(ctx, pr, info)
			if err != nil {
				return fmt.Errorf("bulk: %w", err)
			}
			if err := emit(enc, *asJSON, r, r.print, stdout); err != nil {
				return err
			}
		case "steady":
			c := pr
			c.duration = *steadyFor
			r, err := benchSteady(ctx, c, info)
			if err != nil {
				return fmt.Errorf("steady: %w", err)
			}
			if err := emit(enc, *asJSON, r, r.print, stdout); err != nil {
				return err
			}
		case "defaults":
			r, err := benchDefaults(ctx, dc, info)
			if err != nil {
				return fmt.Errorf("defaults: %w", err)
			}
			if err := emit(enc, *asJSON, r, r.print, stdout); err != nil {
				return err
			}
		case "latency":
			r, err := benchLatency(ctx, lc, info)
			if err != nil {
				return fmt.Errorf("latency: %w", err)
			}
			if err := emit(enc, *asJSON, r, r.print, stdout); err != nil {
				return err
			}
		case "many-claims":
			r, err := benchManyClaims(ctx, mc, info)
			if err != nil {
				return fmt.Errorf("many-claims: %w", err)
			}
			if err := emit(enc, *asJSON, r, r.print, stdout); err != nil {
				return err
			}
		case "ledger":
			r, err := benchLedger(ctx, pc, info)
			if err != nil {
				return fmt.Errorf("ledger: %w", err)
			}
			if *asJSON {
				if err := enc.Encode(r.ledgerJSON(*poll)); err != nil {
					return err
				}
				continue
			}
			r.print(stdout, "ledger", "batch", "batches", fmt.Sprintf(", simulator at zero latency, poll interval %s", *poll))
		case "failover":
			r, err := benchFailover(ctx, fo, info)
			if err != nil {
				return fmt.Errorf("failover: %w", err)
			}
			if err := emit(enc, *asJSON, r, r.print, stdout); err != nil {
				return err
			}
		case "scale":
			r, err := benchScale(ctx, sc, info)
			if err != nil {
				return fmt.Errorf("scale: %w", err)
			}
			if err := emit(enc, *asJSON, r, r.print, stdout); err != nil {
				return err
			}
		case "churn":
			r, err := benchChurn(ctx, ch, info)
			if err != nil {
				return fmt.Errorf("churn: %w", err)
			}
			if err := emit(enc, *asJSON, r, r.print, stdout); err != nil {
				return err
			}
		case "cycle":
			if err := benchCycle(ctx, *instances, *serviceIDs, *duration, *keep, *asJSON, info, stdout); err != nil {
				return fmt.Errorf("cycle: %w", err)
			}
		}
	}
	return nil
}

// emit prints a scenario's result: one JSON line, or its text summary.
func emit(enc *json.Encoder, asJSON bool, v any, print func(io.Writer), w io.Writer) error {
	if asJSON {
		return enc.Encode(v)
	}
	print(w)
	return nil
}

// benchCycle measures the claim cycle.
func benchCycle(ctx context.Context, instances, serviceIDs int, duration time.Duration, keep, asJSON bool, info, stdout io.Writer) error {
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	db, err := database.NewScratch(ctx, "batchclaim_bench", keep, info, logger)
	if err != nil {
		return err
	}
	defer db.Close(ctx)
	admin, err := database.Open(ctx, db.URL, 2)
	if err != nil {
		return err
	}
	defer admin.Close()
	ids := make([]string, serviceIDs)
	for i := range ids {
		ids[i] = fmt.Sprintf("bench-%06d", i)
	}
	if err := claims.RegisterServiceIDs(ctx, admin, ids...); err != nil {
		return err
	}
	engines := make([]*claims.Engine, instances)
	var pools []*pgxpool.Pool
	defer func() {
		for _, p := range pools {
			p.Close()
		}
	}()
	for i := range engines {
		pool, err := database.Open(ctx, db.URL, 2)
		if err != nil {
			return err
		}
		pools = append(pools, pool)
		pdb, err := pgdb.Open(pool, "")
		if err != nil {
			return err
		}
		if engines[i], err = claims.New(pdb, claims.Config{Name: fmt.Sprintf("bench-%d", i)}); err != nil {
			return err
		}
		if err := engines[i].Register(ctx); err != nil {
			return err
		}
	}
	b := bench{engines: engines, admin: admin, k: serviceIDs}
	acquire, err := b.phase(ctx, "acquire", 0)
	if err != nil {
		return err
	}
	steady, err := b.phase(ctx, "steady", duration)
	if err != nil {
		return err
	}
	phases := []benchPhase{acquire, steady}
	for _, p := range pools {
		p.Close()
	}
	pools = nil
	totals, err := b.totals(ctx, acquire.Cycles+steady.Cycles)
	if err != nil {
		return err
	}
	if asJSON {
		return json.NewEncoder(stdout).Encode(map[string]any{"scenario": "cycle", "instances": instances, "service_ids": serviceIDs,
			"cycles_per_second": steady.CyclesPerSecond, "phases": phases, "totals": totals})
	}
	fmt.Fprintf(stdout, "cycle: %d instances cycling flat out over %d service_ids\n\n", instances, serviceIDs)
	fmt.Fprintf(stdout, "%-8s %8s %8s %9s %8s %7s %8s %8s %13s\n", "phase", "seconds", "cycles", "cycles/s", "retries", "retry%", "p50 ms", "p99 ms", "owner changes")
	for _, p := range phases {
		fmt.Fprintf(stdout, "%-8s %8.1f %8d %9.0f %8d %6.2f%% %8.1f %8.1f %13d\n", p.Name, p.Seconds, p.Cycles, p.CyclesPerSecond,
			p.Retries, p.RetryPercent, p.P50Millis, p.P99Millis, p.OwnerChanges)
	}
	fmt.Fprintf(stdout, "\nrow updates over the run: service_id_claims %d (ownership changes %d), instances %d (cycles %d)\n\n",
		totals.ClaimRowUpdates, totals.OwnerChanges, totals.InstanceRowUpdates, totals.Cycles)
	return nil
}

type bench struct {
	engines []*claims.Engine
	admin   *pgxpool.Pool
	k       int
}

// phase runs every engine flat out, for d, or (d == 0) until the claims are balanced.
func (b *bench) phase(ctx context.Context, name string, d time.Duration) (benchPhase, error) {
	before, err := b.ownerChanges(ctx)
	if err != nil {
		return benchPhase{}, err
	}
	var retries0, give0 int64
	for _, e := range b.engines {
		retries0 += e.Stats().SerializationRetries
		give0 += e.Stats().SerializationGiveUps
	}
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if d > 0 {
		pctx, cancel = context.WithTimeout(pctx, d)
		defer cancel()
	}
	var mu sync.Mutex
	var lat []time.Duration
	held := make([]int, len(b.engines))
	var firstErr error
	start := time.Now()
	var wg sync.WaitGroup
	for i, e := range b.engines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for pctx.Err() == nil {
				t := time.Now()
				rep, err := e.Cycle(pctx)
				if pctx.Err() != nil {
					return
				}
				mu.Lock()
				lat = append(lat, time.Since(t))
				held[i] = rep.Held
				if err != nil && firstErr == nil {
					firstErr = err
				}
				if d == 0 && balanced2(held, b.k) {
					cancel()
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if firstErr != nil && d == 0 {
		return benchPhase{}, firstErr
	}
	p := benchPhase{Name: name, Seconds: time.Since(start).Seconds(), Cycles: int64(len(lat))}
	for _, e := range b.engines {
		p.Retries += e.Stats().SerializationRetries
		p.GiveUps += e.Stats().SerializationGiveUps
	}
	p.Retries -= retries0
	p.GiveUps -= give0
	p.CyclesPerSecond = float64(p.Cycles) / p.Seconds
	if p.Cycles > 0 {
		p.RetryPercent = 100 * float64(p.Retries) / float64(p.Cycles)
		slices.Sort(lat)
		p.P50Millis = float64(lat[len(lat)/2].Microseconds()) / 1000
		p.P99Millis = float64(lat[len(lat)*99/100].Microseconds()) / 1000
	}
	after, err := b.ownerChanges(ctx)
	p.OwnerChanges = after - before
	return p, err
}

// balanced2: every claim held and no two instances differ by more than one.
func balanced2(held []int, k int) bool {
	total, lo, hi := 0, held[0], held[0]
	for _, h := range held {
		total += h
		lo, hi = min(lo, h), max(hi, h)
	}
	return total == k && hi-lo <= 1
}

func (b *bench) ownerChanges(ctx context.Context) (int64, error) {
	var n int64
	err := b.admin.QueryRow(ctx, `SELECT count(*) FROM batchclaim.claim_events`).Scan(&n)
	return n, err
}

// totals reads the tables' row-update counters once every instance has disconnected.
func (b *bench) totals(ctx context.Context, cycles int64) (benchTotals, error) {
	t := benchTotals{Cycles: cycles}
	var err error
	if t.OwnerChanges, err = b.ownerChanges(ctx); err != nil {
		return t, err
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		var sessions int
		if err := b.admin.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`).Scan(&sessions); err != nil {
			return t, err
		}
		if sessions == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := b.admin.Exec(ctx, `SELECT pg_stat_clear_snapshot()`); err != nil {
		return t, err
	}
	err = b.admin.QueryRow(ctx, `SELECT
		(SELECT n_tup_upd FROM pg_stat_user_tables WHERE relname = 'service_id_claims'),
		(SELECT n_tup_upd FROM pg_stat_user_tables WHERE relname = 'instances')`).Scan(&t.ClaimRowUpdates, &t.InstanceRowUpdates)
	return t, err
}
