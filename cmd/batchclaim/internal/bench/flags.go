package bench

import (
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/batchclaim/batchclaim/submitter"
)

// commonFlags are the flags of `batchclaim bench` that are no scenario's own: every scenario
// reads them, and a scenario's row in scenarios lists only the others.
var commonFlags = []string{"scenario", "json", "keep", "cpu-profile", "alloc-profile"}

// settings are the flags of `batchclaim bench`, parsed: the common ones, then each
// scenario's own (a scenario's row in scenarios names those it reads). The flags of a
// scenario go straight into the fields of its config where it has one; each run function
// completes that config (keep, the --*-run-flags split into arguments) before it runs.
type settings struct {
	scenario     string
	asJSON       bool
	keep         bool
	cpuProfile   string
	allocProfile string

	path       pathConfig // jobs and ledger; serial reads its workers and conns
	serialJobs int
	producer   producerConfig // enqueue, bulk and steady
	enqueueFor time.Duration
	steadyFor  time.Duration

	latency         latencyConfig
	latencyRunFlags string
	latencyOffFlags string

	defaults         defaultsConfig
	defaultsRunFlags string

	manyClaims         manyClaimsConfig
	manyClaimsRunFlags string

	failover failoverConfig
	scale    scaleConfig
	churn    churnConfig
	cycle    cycleConfig
}

// define defines every flag of `batchclaim bench` on fs, each once, bound to s.
func (s *settings) define(fs *flag.FlagSet) {
	fs.StringVar(&s.scenario, "scenario", "all", strings.Join(append(scenarioNames(), "all"), " | "))
	fs.BoolVar(&s.asJSON, "json", false, "print one JSON object per scenario, one a line")
	fs.BoolVar(&s.keep, "keep", false, "keep the scratch databases (and the failover and scale instance logs)")
	fs.StringVar(&s.cpuProfile, "cpu-profile", "", "write a CPU profile of this process over the scenarios to this file (go tool pprof)")
	fs.StringVar(&s.allocProfile, "alloc-profile", "", "write the allocations of this process over the scenarios (sampled; the work's storing included) to this file (go tool pprof -sample_index=alloc_space)")

	fs.IntVar(&s.path.nodes, "nodes", 2, "jobs, ledger: nodes, each with its own pool")
	fs.IntVar(&s.path.workers, "workers", submitter.WorkersDefault, "jobs, ledger: workers (concurrent submissions) per node (default: run's)")
	fs.IntVar(&s.path.conns, "conns", 0, "jobs, ledger: database connections per node (0: pgx's default, max(4, CPUs), as batchclaim run uses)")
	fs.IntVar(&s.path.keys, "keys", 1000, "jobs, ledger: keys (service_ids)")
	fs.IntVar(&s.path.perKey, "per-key", 10, "jobs, ledger: jobs (batches) per key")
	fs.IntVar(&s.path.fillfactor, "fillfactor", 0, "jobs, serial, ledger: the batches table's fillfactor in the scratch database, set before the work is stored (10 to 100; 0: the table's own, 100; see docs/operations.md, \"Fill factor\")")
	fs.DurationVar(&s.path.pollInterval, "poll-interval", time.Second, "ledger: how often each node asks the ledger about accepted batches")
	fs.IntVar(&s.serialJobs, "serial-jobs", 2000, "serial: jobs of the one key")

	fs.IntVar(&s.producer.producers, "producers", 16, "enqueue, steady: goroutines that enqueue, on a pool of their own (one connection each)")
	fs.IntVar(&s.producer.keys, "producer-keys", 1000, "enqueue, steady: keys (service_ids) the jobs go to, in turn")
	fs.IntVar(&s.producer.nodes, "producer-nodes", 2, "enqueue, steady: nodes working the jobs off, with run's defaults")
	fs.DurationVar(&s.enqueueFor, "enqueue-duration", 20*time.Second, "enqueue: how long the producers run")
	fs.Float64Var(&s.producer.rate, "steady-rate", 600, "steady: jobs per second asked for")
	fs.DurationVar(&s.steadyFor, "steady-duration", time.Minute, "steady: how long the producers run")
	fs.IntVar(&s.producer.bulkJobs, "bulk-jobs", 10000, "bulk: jobs of one EnqueueMany call")
	fs.IntVar(&s.producer.bulkRuns, "bulk-runs", 5, "bulk: calls, each timed")
	fs.BoolVar(&s.producer.bulkWithoutIDs, "bulk-without-ids", false, "bulk: jobs without ids (none registered to skip repeats), as River's InsertManyFast stores them")
	fs.DurationVar(&s.producer.window, "steady-window", 10*time.Second, "steady: latencies are reported per window of this length")
	fs.BoolVar(&s.producer.holdSnapshot, "steady-hold-snapshot", false, "steady: a session holds one REPEATABLE READ snapshot for the whole run, so no dead row of it can be vacuumed")

	fs.IntVar(&s.latency.batches, "latency-batches", 40, "latency: batches POSTed one at a time, in each of the two runs")
	fs.IntVar(&s.latency.serviceIDs, "latency-service-ids", 10, "latency: service_ids the batches go to, in turn")
	fs.StringVar(&s.latencyRunFlags, "latency-run-flags", "", "latency: more flags for every `run` process of both runs, space-separated")
	fs.StringVar(&s.latencyOffFlags, "latency-off-flags", "--notify=false", "latency: flags that turn listening off, added in the second run when `run --help` lists them")
	fs.DurationVar(&s.latency.gap, "latency-pause", 0, "latency: pauses before each POST are drawn from [0, this), so that batches arrive at any point of a periodic fetch (0: the processes' renew interval)")
	fs.DurationVar(&s.latency.limit, "latency-timeout", time.Minute, "latency: longest wait for one batch's POST or its end")

	fs.IntVar(&s.defaults.serviceIDs, "defaults-service-ids", 1000, "defaults: service_ids")
	fs.IntVar(&s.defaults.perKey, "defaults-per-key", 20, "defaults: batches per service_id")
	fs.StringVar(&s.defaultsRunFlags, "defaults-run-flags", "", "defaults: more flags for both `run` processes, space-separated (e.g. \"--workers 500\")")
	fs.DurationVar(&s.defaults.readyzEvery, "defaults-readyz-interval", 100*time.Millisecond, "defaults: how often each process's /readyz is probed")
	fs.DurationVar(&s.defaults.limit, "defaults-timeout", 10*time.Minute, "defaults: give up when the batches are not all committed by then")

	fs.IntVar(&s.manyClaims.claims, "many-claims", 2000, "many-claims: service_ids, all held by the one process (e.g. 100000)")
	fs.IntVar(&s.manyClaims.last, "many-claims-last", 500, "many-claims: keys, those that sort last, given a second batch")
	fs.DurationVar(&s.manyClaims.limit, "many-claims-timeout", time.Minute, "many-claims: how long the second batches are waited for")
	fs.DurationVar(&s.manyClaims.firstLimit, "many-claims-first-timeout", 10*time.Minute, "many-claims: how long the first round is waited for")
	fs.DurationVar(&s.manyClaims.claimLimit, "many-claims-hold-timeout", 10*time.Minute, "many-claims: give up when the process does not hold every claim by then")
	fs.StringVar(&s.manyClaimsRunFlags, "many-claims-run-flags", "", "many-claims: more flags for the `run` process, space-separated")

	fs.IntVar(&s.failover.instances, "failover-instances", 3, "failover: run processes (at least 2)")
	fs.IntVar(&s.failover.serviceIDs, "failover-service-ids", 30, "failover: service_ids")
	fs.IntVar(&s.failover.repeat, "failover-repeat", 3, "failover: faults of each kind")
	fs.DurationVar(&s.failover.renew, "failover-renew-interval", time.Second, "failover: the processes' --renew-interval R")
	fs.DurationVar(&s.failover.expiry1, "failover-expiry-1", 4*time.Second, "failover: the processes' --expiry-1 T1")
	fs.DurationVar(&s.failover.expiry2, "failover-expiry-2", 8*time.Second, "failover: the processes' --expiry-2 T2")

	fs.IntVar(&s.scale.serviceIDs, "scale-service-ids", 100000, "scale: service_ids")
	fs.IntVar(&s.scale.processes, "scale-processes", 32, "scale: run --claims-only processes, started together")
	fs.DurationVar(&s.scale.renew, "scale-renew-interval", time.Second, "scale: the processes' --renew-interval R")
	fs.DurationVar(&s.scale.expiry1, "scale-expiry-1", 6*time.Second, "scale: the processes' --expiry-1 T1")
	fs.DurationVar(&s.scale.expiry2, "scale-expiry-2", 24*time.Second, "scale: the processes' --expiry-2 T2")
	fs.IntVar(&s.scale.intervals, "scale-intervals", 10, "scale: renew intervals over which the statements of balanced instances are counted")
	fs.DurationVar(&s.scale.limit, "scale-timeout", 100*time.Second, "scale: give up when the claims are not balanced by then")

	fs.IntVar(&s.churn.keys, "churn-keys", 1000000, "churn: keys ever seen (claim rows at the start)")
	fs.IntVar(&s.churn.active, "churn-active", 1000, "churn: keys with work (one unfinished batch each)")
	fs.IntVar(&s.churn.engines, "churn-engines", 4, "churn: claim engines, each with its own pool")
	fs.DurationVar(&s.churn.renew, "churn-renew-interval", time.Second, "churn: the engines' renew interval R (expiry-1 6R, expiry-2 24R)")
	fs.DurationVar(&s.churn.dropIdle, "churn-drop-idle-after", 2*time.Second, "churn: the engines' DropIdleAfter")
	fs.IntVar(&s.churn.chunk, "churn-chunk-size", 0, "churn: the engines' ChunkSize, rows per void, acquire or drop statement (0: the engine's default, 1000)")
	fs.DurationVar(&s.churn.window, "churn-window", 10*time.Second, "churn: how long cycles and statements are measured once balanced")
	fs.DurationVar(&s.churn.drainLimit, "churn-drain-timeout", 120*time.Second, "churn: stop waiting for the idle rows to be dropped after this long, and measure while they are (4 engines dropped 1,000,000 rows in about a minute on 2 cores)")

	fs.IntVar(&s.cycle.instances, "instances", 8, "cycle: instances cycling concurrently")
	fs.IntVar(&s.cycle.serviceIDs, "service-ids", 2000, "cycle: service_ids")
	fs.DurationVar(&s.cycle.duration, "duration", 10*time.Second, "cycle: length of the steady phase")
}

// check refuses values no scenario can run with. It checks the flags of every scenario,
// not only of those --scenario chooses, so that a bad value fails at once whatever runs.
func (s *settings) check() error {
	p, pr := s.path, s.producer
	lc, dc, mc := s.latency, s.defaults, s.manyClaims
	fo, sc, ch := s.failover, s.scale, s.churn
	if p.nodes < 1 || p.workers < 1 || p.keys < 1 || p.perKey < 1 || p.pollInterval <= 0 || p.conns < 0 {
		return fmt.Errorf("--nodes, --workers, --keys and --per-key must be at least 1, --conns not negative, --poll-interval positive")
	}
	if p.fillfactor != 0 && (p.fillfactor < 10 || p.fillfactor > 100) {
		return fmt.Errorf("--fillfactor %d: want 10 to 100, or 0 for the table's own", p.fillfactor)
	}
	if s.cycle.instances < 1 || s.cycle.serviceIDs < 1 || s.cycle.duration <= 0 {
		return fmt.Errorf("--instances and --service-ids must be at least 1, --duration positive")
	}
	if s.serialJobs < 1 {
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
	if pr.producers < 1 || pr.keys < 1 || pr.nodes < 1 || pr.bulkJobs < 1 || pr.bulkRuns < 1 || s.enqueueFor <= 0 || s.steadyFor <= 0 || pr.rate <= 0 || pr.window <= 0 {
		return fmt.Errorf("--producers, --producer-keys, --producer-nodes, --bulk-jobs and --bulk-runs must be at least 1, --enqueue-duration, --steady-duration, --steady-rate and --steady-window positive")
	}
	if fo.instances < 2 || fo.serviceIDs < fo.instances || fo.repeat < 1 {
		return fmt.Errorf("--failover-instances must be at least 2, --failover-service-ids at least --failover-instances, --failover-repeat at least 1")
	}
	if sc.processes < 1 || sc.serviceIDs < 1 || sc.intervals < 1 || sc.limit <= 0 {
		return fmt.Errorf("--scale-processes, --scale-service-ids and --scale-intervals must be at least 1, --scale-timeout positive")
	}
	if ch.engines < 1 || ch.active < 1 || ch.keys < ch.active || ch.renew <= 0 || ch.dropIdle <= 0 || ch.chunk < 0 || ch.window <= 0 || ch.drainLimit <= 0 {
		return fmt.Errorf("--churn-engines and --churn-active must be at least 1, --churn-keys at least --churn-active, --churn-chunk-size not negative, the --churn durations positive")
	}
	return nil
}
