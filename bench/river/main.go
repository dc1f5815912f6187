package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"os/signal"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// localURL is the server used when DATABASE_URL is not set.
const localURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

// tuning is one way of configuring River's client.
type tuning struct {
	fetchCooldown, fetchPollInterval time.Duration
	workers                          int
}

// tunings: "riverbench" is what River's own benchmark (cmd/river/riverbench in River's
// repository) sets; "defaults" is River's client defaults (FetchCooldownDefault,
// FetchPollIntervalDefault) with the worker count at which River at its defaults was
// fastest here (River has no default MaxWorkers).
var tunings = map[string]tuning{
	"riverbench": {fetchCooldown: 2 * time.Millisecond, fetchPollInterval: 20 * time.Millisecond, workers: 2000},
	"defaults":   {fetchCooldown: river.FetchCooldownDefault, fetchPollInterval: river.FetchPollIntervalDefault, workers: 1000},
}

// insertBatch is how many jobs one InsertMany call stores, as riverbench does.
const insertBatch = 5000

// result is the line printed, in the shape of `batchclaim bench --json`.
type result struct {
	Scenario           string  `json:"scenario"`
	Tuning             string  `json:"tuning"`
	RiverVersion       string  `json:"river_version"`
	JobsPerSecond      float64 `json:"jobs_per_second"`
	Workers            int     `json:"workers"`
	FetchCooldownMs    float64 `json:"fetch_cooldown_ms"`
	FetchPollMs        float64 `json:"fetch_poll_interval_ms"`
	Conns              int     `json:"conns"`
	Jobs               int     `json:"jobs"`
	Seconds            float64 `json:"seconds"`
	InsertSeconds      float64 `json:"insert_seconds"`
	CompletedInTable   int     `json:"completed_in_table"`
	CompletedEvents    int     `json:"completed_events"`
	Method             string  `json:"method"`
	StatementTimeout   string  `json:"statement_timeout"`
	IdleInTxnTimeout   string  `json:"idle_in_transaction_session_timeout"`
	ConnsNote          string  `json:"conns_note,omitempty"`
	SettingsOverridden bool    `json:"settings_overridden"`
}

// method says how a run inserts, times and counts, for the JSON line.
const method = "riverbench's --num-total-jobs mode: river_job truncated and VACUUM FULLed, jobs inserted with " +
	"InsertMany 5,000 a call before the client starts, the clock from Start's return to the last job_completed " +
	"event; then every job checked completed in river_job"

type noopArgs struct{}

func (noopArgs) Kind() string { return "noop" }

type noopWorker struct {
	river.WorkerDefaults[noopArgs]
}

func (noopWorker) Work(context.Context, *river.Job[noopArgs]) error { return nil }

// config is one run's settings.
type config struct {
	tuning  string
	t       tuning
	jobs    int
	conns   int // 0: pgx's default pool size, as riverbench's CLI opens it
	timeout time.Duration
}

func main() {
	fs := flag.NewFlagSet("river", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: go run . [--tuning riverbench|defaults] [--jobs N] [flags]\n\n"+
			"Measures River's no-op jobs on a scratch database (DATABASE_URL, else %s)\n"+
			"and prints one JSON line. --tuning riverbench: FetchCooldown 2ms, FetchPollInterval 20ms,\n"+
			"2,000 workers, as River's own benchmark (cmd/river/riverbench) sets them; --tuning defaults:\n"+
			"River's client defaults (FetchCooldown 100ms, FetchPollInterval 1s) with 1,000 workers.\n\n", localURL)
		fs.PrintDefaults()
	}
	name := fs.String("tuning", "riverbench", "riverbench | defaults")
	workers := fs.Int("workers", 0, "MaxWorkers of the default queue (0: the tuning's, 2,000 or 1,000)")
	cooldown := fs.Duration("fetch-cooldown", 0, "FetchCooldown (0: the tuning's)")
	pollInterval := fs.Duration("fetch-poll-interval", 0, "FetchPollInterval (0: the tuning's)")
	jobs := fs.Int("jobs", 100000, "no-op jobs inserted before the client starts")
	conns := fs.Int("conns", 0, "pool connections (0: pgx's default, max(4, CPUs), which riverbench's pool gets)")
	timeout := fs.Duration("timeout", 10*time.Minute, "give up after this long")
	scenario := fs.String("scenario", "river", "river (the backlog of no-op jobs) | enqueue | steady | bulk (the producer scenarios of `batchclaim bench`)")
	var pc producerConfig
	fs.IntVar(&pc.producers, "producers", 16, "enqueue, steady: goroutines that insert, through a client and a pool of their own (one connection each)")
	fs.DurationVar(&pc.duration, "duration", 0, "enqueue, steady: how long the producers run (0: 20s for enqueue, 1m for steady, as batchclaim bench's --enqueue-duration and --steady-duration)")
	fs.Float64Var(&pc.rate, "rate", 600, "steady: jobs per second asked for")
	fs.DurationVar(&pc.window, "window", 10*time.Second, "steady: latencies are reported per window of this length")
	fs.IntVar(&pc.bulkJobs, "bulk-jobs", 10000, "bulk: jobs of one InsertManyFast call")
	fs.IntVar(&pc.bulkRuns, "bulk-runs", 5, "bulk: calls, each timed")
	fs.BoolVar(&pc.bulkUnique, "bulk-unique", false, "bulk: every job with UniqueOpts{ByArgs: true} (a unique key stored per job, as batchclaim registers each job's pair)")
	fs.BoolVar(&pc.holdSnapshot, "hold-snapshot", false, "steady: a session holds one REPEATABLE READ snapshot for the whole run, so no dead row of it can be vacuumed")
	if err := fs.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		os.Exit(2)
	}
	t, ok := tunings[*name]
	switch {
	case !ok:
		usage(fmt.Sprintf("--tuning %q: want riverbench or defaults", *name))
	case fs.NArg() > 0:
		usage(fmt.Sprintf("unexpected argument %q", fs.Arg(0)))
	case *jobs < 1 || *workers < 0 || *conns < 0:
		usage("--jobs must be at least 1, --workers and --conns not negative")
	case *cooldown < 0 || *pollInterval < 0 || *timeout <= 0:
		usage("--fetch-cooldown and --fetch-poll-interval must not be negative, --timeout positive")
	case pc.producers < 1 || pc.duration < 0 || pc.rate <= 0 || pc.window <= 0 || pc.bulkJobs < 1 || pc.bulkRuns < 1:
		usage("--producers, --bulk-jobs and --bulk-runs must be at least 1, --duration not negative, --rate and --window positive")
	}
	if pc.duration == 0 {
		pc.duration = 20 * time.Second
		if *scenario == "steady" {
			pc.duration = time.Minute
		}
	}
	c := config{tuning: *name, t: tuning{fetchCooldown: cmp.Or(*cooldown, t.fetchCooldown),
		fetchPollInterval: cmp.Or(*pollInterval, t.fetchPollInterval), workers: cmp.Or(*workers, t.workers)},
		jobs: *jobs, conns: *conns, timeout: *timeout}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	serverURL := cmp.Or(os.Getenv("DATABASE_URL"), localURL)
	var out any
	var err error
	switch *scenario {
	case "river":
		var r result
		r, err = run(ctx, serverURL, c)
		r.SettingsOverridden = c.t != t
		out = r
	case "enqueue":
		out, err = runEnqueue(ctx, serverURL, c, pc)
	case "steady":
		out, err = runSteady(ctx, serverURL, c, pc)
	case "bulk":
		out, err = runBulk(ctx, serverURL, c, pc)
	default:
		usage(fmt.Sprintf("--scenario %q: want river, enqueue, steady or bulk", *scenario))
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "river:", err)
		os.Exit(1)
	}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		fmt.Fprintln(os.Stderr, "river:", err)
		os.Exit(1)
	}
}

func usage(msg string) {
	fmt.Fprintln(os.Stderr, "river:", msg)
	os.Exit(2)
}

func run(ctx context.Context, serverURL string, c config) (result, error) {
	r := result{Scenario: "river", Tuning: c.tuning, RiverVersion: riverVersion(), Workers: c.t.workers, Jobs: c.jobs,
		FetchCooldownMs: ms(c.t.fetchCooldown), FetchPollMs: ms(c.t.fetchPollInterval), Method: method}
	dbURL, drop, err := scratch(ctx, serverURL)
	if err != nil {
		return r, err
	}
	defer drop()
	pool, err := openPool(ctx, dbURL, c.conns)
	if err != nil {
		return r, err
	}
	defer pool.Close()
	r.Conns = int(pool.Config().MaxConns)
	r.StatementTimeout = pool.Config().ConnConfig.RuntimeParams["statement_timeout"] + "ms"
	r.IdleInTxnTimeout = pool.Config().ConnConfig.RuntimeParams["idle_in_transaction_session_timeout"] + "ms"
	if c.conns == 0 {
		r.ConnsNote = "pgx's default pool size, as riverbench's CLI opens its pool"
	}
	driver := riverpgxv5.New(pool)
	migrator, err := rivermigrate.New(driver, nil)
	if err != nil {
		return r, err
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return r, fmt.Errorf("migrate river schema: %w", err)
	}
	// riverbench starts from an empty, compacted jobs table.
	for _, sql := range []string{"TRUNCATE river_job", "VACUUM FULL river_job"} {
		if _, err := pool.Exec(ctx, sql); err != nil {
			return r, fmt.Errorf("%s: %w", sql, err)
		}
	}
	w := river.NewWorkers()
	river.AddWorker(w, noopWorker{})
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	client, err := river.NewClient(driver, &river.Config{
		FetchCooldown:     c.t.fetchCooldown,
		FetchPollInterval: c.t.fetchPollInterval,
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: c.t.workers}},
		Workers:           w,
		Logger:            logger,
	})
	if err != nil {
		return r, err
	}
	// Every job's end is an event; the channel holds them all, so none is dropped however
	// slowly this loop reads (riverbench sizes it at 75,000 for the same reason).
	events, unsubscribe := client.SubscribeConfig(&river.SubscribeConfig{
		ChanSize: max(c.jobs, 75000),
		Kinds:    []river.EventKind{river.EventKindJobCompleted, river.EventKindJobFailed, river.EventKindJobCancelled},
	})
	defer unsubscribe()

	insertStart := time.Now()
	params := make([]river.InsertManyParams, insertBatch)
	for i := range params {
		params[i] = river.InsertManyParams{Args: noopArgs{}}
	}
	for left := c.jobs; left > 0; left -= insertBatch {
		if _, err := client.InsertMany(ctx, params[:min(left, insertBatch)]); err != nil {
			return r, fmt.Errorf("insert jobs: %w", err)
		}
	}
	r.InsertSeconds = round3(time.Since(insertStart).Seconds())

	if err := client.Start(ctx); err != nil {
		return r, err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_ = client.Stop(sctx)
	}()
	start := time.Now()
	var last time.Time
	for r.CompletedEvents < c.jobs {
		select {
		case <-ctx.Done():
			return r, fmt.Errorf("%d of %d jobs completed: %w", r.CompletedEvents, c.jobs, ctx.Err())
		case e := <-events:
			if e == nil {
				return r, fmt.Errorf("subscription closed after %d of %d jobs", r.CompletedEvents, c.jobs)
			}
			if e.Kind != river.EventKindJobCompleted {
				return r, fmt.Errorf("job %d: %s (state %s)", e.Job.ID, e.Kind, e.Job.State)
			}
			r.CompletedEvents++
			last = time.Now()
		}
	}
	r.Seconds = round3(last.Sub(start).Seconds())
	r.JobsPerSecond = round3(float64(c.jobs) / last.Sub(start).Seconds())
	if r.CompletedInTable, err = checkCompleted(ctx, pool, c.jobs); err != nil {
		return r, err
	}
	return r, nil
}

// checkCompleted checks that river_job holds exactly jobs rows, every one completed. River
// sends job_completed once the completer stored the state, so this holds at once; a few
// seconds' grace covers a completer that reports before its transaction is visible.
func checkCompleted(ctx context.Context, pool *pgxpool.Pool, jobs int) (int, error) {
	deadline := time.Now().Add(5 * time.Second)
	for {
		var total, completed int
		err := pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE state = 'completed') FROM river_job`).Scan(&total, &completed)
		if err != nil {
			return 0, fmt.Errorf("count completed jobs: %w", err)
		}
		if total != jobs {
			return completed, fmt.Errorf("river_job holds %d jobs, want %d", total, jobs)
		}
		if completed == jobs {
			return completed, nil
		}
		if time.Now().After(deadline) {
			return completed, fmt.Errorf("%d of %d jobs completed in river_job after every job_completed event", completed, jobs)
		}
		select {
		case <-ctx.Done():
			return completed, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// openPool opens the pool as riverbench's CLI does: pgx's configuration from the URL, with
// application_name, statement_timeout (10s) and idle_in_transaction_session_timeout (11s)
// set unless the URL sets them. conns > 0 sets the pool size.
func openPool(ctx context.Context, dbURL string, conns int) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		return nil, fmt.Errorf("database URL: %w", err)
	}
	params := cfg.ConnConfig.RuntimeParams
	for name, val := range map[string]string{"application_name": "river bench",
		"statement_timeout": strconv.Itoa(10000), "idle_in_transaction_session_timeout": strconv.Itoa(11000)} {
		if params[name] == "" {
			params[name] = val
		}
	}
	if conns > 0 {
		cfg.MaxConns = int32(conns)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	return pool, nil
}

// riverVersion is the version of River this binary was built with.
func riverVersion() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, d := range info.Deps {
			if d.Path == "github.com/riverqueue/river" {
				return d.Version
			}
		}
	}
	return "unknown"
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func round3(x float64) float64 { return float64(int64(x*1000+0.5)) / 1000 }

// scratch creates an empty database on the server and returns its URL and a function that
// drops it.
func scratch(ctx context.Context, serverURL string) (string, func(), error) {
	u, err := url.Parse(serverURL)
	if err != nil {
		return "", nil, fmt.Errorf("database URL: %w", err)
	}
	name := fmt.Sprintf("river_bench_%d_%d", os.Getpid(), time.Now().Unix()%100000)
	conn, err := pgx.Connect(ctx, serverURL)
	if err != nil {
		return "", nil, fmt.Errorf("connect: %w", err)
	}
	_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
	conn.Close(ctx)
	if err != nil {
		return "", nil, fmt.Errorf("create scratch database: %w", err)
	}
	drop := func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 20*time.Second)
		defer cancel()
		c, err := pgx.Connect(dctx, serverURL)
		if err != nil {
			fmt.Fprintln(os.Stderr, "river: drop scratch database:", err)
			return
		}
		defer c.Close(dctx)
		if _, err := c.Exec(dctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			fmt.Fprintln(os.Stderr, "river: drop scratch database:", errors.Unwrap(err))
		}
	}
	u.Path = "/" + name
	return u.String(), drop, nil
}
