package bench

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/claims"
	"github.com/batchclaim/batchclaim/cmd/batchclaim/internal/database"
	"github.com/batchclaim/batchclaim/cmd/batchclaim/internal/redact"
	"github.com/batchclaim/batchclaim/dlt"
	"github.com/batchclaim/batchclaim/dlt/dltsim"
	"github.com/batchclaim/batchclaim/ingest"
	"github.com/batchclaim/batchclaim/node"
	"github.com/batchclaim/batchclaim/observer"
	"github.com/batchclaim/batchclaim/pgdb"
	"github.com/batchclaim/batchclaim/submitter"
)

// pathConfig is the shape of a jobs or ledger run.
type pathConfig struct {
	nodes, keys, perKey, workers int
	conns                        int           // per node; 0: pgx's default, as `batchclaim run` uses
	pollInterval                 time.Duration // ledger only
	fillfactor                   int           // the batches table's; 0: the table's own (100)
	keep                         bool
}

// pathResult is what a jobs or ledger run measured. Units are jobs or batches; the JSON
// field names say which (see jobsJSON and ledgerJSON).
type pathResult struct {
	Nodes, Keys, PerKey, Workers int
	Conns                        int
	Units                        int
	Seconds                      float64
	P50Ms, P99Ms                 float64
	// HalfP50, HalfMax: when each key had half its units done, as a fraction of the run's
	// time, at the median key and at the last: how evenly the keys progressed. A key that
	// waited while the others ran shows as a maximum near 1.
	HalfP50, HalfMax float64
	// FirstDone: seconds from the nodes' start to the first unit done: the start-up (register,
	// claim, first fetch) the run's time includes.
	FirstDone             float64
	Statements, TxControl int64
	Commits, Rollbacks    int64
	ByStatement           []stmtStat
	// Process is what this process (the nodes, their workers and the bench around them) used
	// while the units ran: the client's side of the cost per unit. The Go runtime lends idle
	// cores to the collector, so the CPU time grows with idle cores as well as with work.
	Process use
	// Server is the CPU time the nodes' server processes (their connections' backends) took
	// while the units ran, read from /proc: known only when the server runs on this machine.
	Server serverUse
	// Fillfactor is the batches table's fillfactor in the scratch database.
	Fillfactor int
}

func (r pathResult) perSecond() float64 { return round3(float64(r.Units) / r.Seconds) }
func (r pathResult) per(n int64) float64 {
	return round3(float64(n) / float64(max(r.Units, 1)))
}

// jobsJSON is the line `bench --json` prints for the jobs scenario.
func (r pathResult) jobsJSON() map[string]any {
	m := map[string]any{"scenario": "jobs", "nodes": r.Nodes, "keys": r.Keys, "jobs_per_key": r.PerKey,
		"workers_per_node": r.Workers, "conns_per_node": r.Conns, "jobs": r.Units, "seconds": round3(r.Seconds),
		"jobs_per_second": r.perSecond(), "latency_p50_ms": r.P50Ms, "latency_p99_ms": r.P99Ms,
		"key_half_done_p50": r.HalfP50, "key_half_done_max": r.HalfMax, "first_done_seconds": r.FirstDone,
		"statements_per_job": r.per(r.Statements), "tx_control_per_job": r.per(r.TxControl),
		"commits_per_job": r.per(r.Commits), "rollbacks": r.Rollbacks, "statements": r.ByStatement,
		"process_cpu_us_per_job": r.cpuPer(), "process_allocs_per_job": r.per(int64(r.Process.allocs)), "process_gcs": r.Process.gcs,
		"fillfactor": r.Fillfactor}
	r.Server.addJSON(m, "server_cpu_us_per_job", r.Units)
	return m
}

// cpuPer is the process's CPU time per unit, in microseconds.
func (r pathResult) cpuPer() float64 {
	return round3(float64(r.Process.cpu.Microseconds()) / float64(max(r.Units, 1)))
}

// serialJSON is the line `bench --json` prints for the serial scenario: one key's jobs.
func (r pathResult) serialJSON() map[string]any {
	m := r.jobsJSON()
	m["scenario"] = "serial"
	return m
}

// ledgerJSON is the line `bench --json` prints for the ledger scenario.
func (r pathResult) ledgerJSON(poll time.Duration) map[string]any {
	m := map[string]any{"scenario": "ledger", "nodes": r.Nodes, "service_ids": r.Keys, "batches_per_service_id": r.PerKey,
		"workers_per_node": r.Workers, "conns_per_node": r.Conns, "poll_interval_ms": poll.Milliseconds(), "batches": r.Units, "seconds": round3(r.Seconds),
		"batches_per_second": r.perSecond(), "latency_p50_ms": r.P50Ms, "latency_p99_ms": r.P99Ms,
		"key_half_done_p50": r.HalfP50, "key_half_done_max": r.HalfMax, "first_done_seconds": r.FirstDone,
		"statements_per_batch": r.per(r.Statements), "tx_control_per_batch": r.per(r.TxControl),
		"commits_per_batch": r.per(r.Commits), "rollbacks": r.Rollbacks, "statements": r.ByStatement,
		"process_cpu_us_per_batch": r.cpuPer(), "process_allocs_per_batch": r.per(int64(r.Process.allocs)), "process_gcs": r.Process.gcs,
		"fillfactor": r.Fillfactor}
	r.Server.addJSON(m, "server_cpu_us_per_batch", r.Units)
	return m
}

func (r pathResult) print(w io.Writer, scenario, unit, units, extra string) {
	fmt.Fprintf(w, "%s: %d nodes x %d workers (%d connections each), %d keys x %d %s stored up front%s\n", scenario, r.Nodes, r.Workers, r.Conns, r.Keys, r.PerKey, units, extra)
	fmt.Fprintf(w, "  %d %s in %.1fs: %.0f %s/s; stored-to-done latency p50 %.0f ms, p99 %.0f ms\n",
		r.Units, units, r.Seconds, r.perSecond(), units, r.P50Ms, r.P99Ms)
	fmt.Fprintf(w, "  each key half done by %.0f %% of the run at the median key, %.0f %% at the last\n", r.HalfP50*100, r.HalfMax*100)
	fmt.Fprintf(w, "  per %s: %.2f statements (%.2f of them BEGIN/COMMIT/ROLLBACK), %.2f commits; %d rollbacks in all\n",
		unit, r.per(r.Statements), r.per(r.TxControl), r.per(r.Commits), r.Rollbacks)
	fmt.Fprintf(w, "  this process, per %s: %.1f us of CPU, %.1f heap allocations (%d collections in all)\n",
		unit, r.cpuPer(), r.per(int64(r.Process.allocs)), r.Process.gcs)
	if r.Server.known {
		fmt.Fprintf(w, "  the nodes' server backends (%d), per %s: %.1f us of CPU; the batches table's fillfactor %d\n",
			r.Server.backends, unit, r.Server.per(r.Units), r.Fillfactor)
	} else {
		fmt.Fprintf(w, "  the batches table's fillfactor %d (the server's CPU is read only when it runs on this machine)\n", r.Fillfactor)
	}
	fmt.Fprintf(w, "  %-44s %9s %8s %9s\n", "statement", "calls", "per "+unit, "mean ms")
	for i, s := range r.ByStatement {
		if i == 12 {
			break
		}
		fmt.Fprintf(w, "  %-44s %9d %8.2f %9.2f\n", s.Name, s.Calls, s.PerUnit, s.MeanMs)
	}
	fmt.Fprintln(w)
}

// Timings of the bench's nodes: those of the demo (R = 200ms), so that the claims settle in
// well under a second and the queuer's tick is short.
func benchClaims(name string) claims.Config {
	return claims.Config{Name: name, RenewInterval: claimRenew, Expiry1: claimExpiry1, Expiry2: claimExpiry2}
}

// benchJobs runs the job-runner path: keys x perKey jobs stored up front, nodes in this
// process, each with its own pool, running a Submitter that does nothing and says Done.
func benchJobs(ctx context.Context, c pathConfig, stderr io.Writer) (pathResult, error) {
	noop := submitter.SubmitterFunc(func(context.Context, batchclaim.Batch) (batchclaim.Result, error) {
		return batchclaim.Result{Verdict: batchclaim.Done}, nil
	})
	payload := func(string, int) (string, []byte) { return "", nil }
	return benchPath(ctx, c, "batchclaim_bench_jobs", stderr, payload, func(*node.Config) {}, noop)
}

// benchLedger runs the ledger path: the node `batchclaim run` runs (the ledger Submitter and
// status poller), nodes in this process, against the simulator at zero commit latency.
func benchLedger(ctx context.Context, c pathConfig, stderr io.Writer) (pathResult, error) {
	sim, err := dltsim.New(dltsim.Config{Flavor: dlt.FlavorSawtooth, Seed: 1})
	if err != nil {
		return pathResult{}, err
	}
	base, err := sim.Start("127.0.0.1:0")
	if err != nil {
		return pathResult{}, err
	}
	defer sim.Close()
	client, err := dlt.NewClient(dlt.Config{Flavor: dlt.FlavorSawtooth, URL: base, RequestTimeout: 10 * time.Second})
	if err != nil {
		return pathResult{}, err
	}
	tweak := func(cfg *node.Config) {
		cfg.Statuses, cfg.SkipValid, cfg.PollInterval = client, client.OrderedOnValid(), c.pollInterval
	}
	return benchPath(ctx, c, "batchclaim_bench_ledger", stderr, dlt.FakeBatch, tweak, client)
}

// benchPath stores the work, runs the nodes until every unit is done, and measures: the
// wall time from the nodes' start to the last unit done, each unit's age when it finished
// (database clock, from its insertion), the statements the nodes sent (counted by the
// client, see StmtCounter), and the transactions the scratch database committed and rolled
// back while the nodes ran (pg_stat_database, read from another database once every node
// session ended, so that the reading itself is not counted).
func benchPath(ctx context.Context, c pathConfig, prefix string, stderr io.Writer,
	payload func(serviceID string, n int) (string, []byte), tweak func(*node.Config), sub submitter.Submitter) (pathResult, error) {
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	db, err := database.NewScratch(ctx, prefix, c.keep, stderr, logger)
	if err != nil {
		return pathResult{}, err
	}
	defer db.Close(ctx)
	r := pathResult{Nodes: c.nodes, Keys: c.keys, PerKey: c.perKey, Workers: c.workers, Units: c.keys * c.perKey, Fillfactor: cmp.Or(c.fillfactor, 100)}
	if err := benchStore(ctx, db.URL, c.keys, c.perKey, c.fillfactor, payload); err != nil {
		return r, err
	}
	server, err := pgx.Connect(ctx, db.Admin)
	if err != nil {
		return r, fmt.Errorf("connect to %s: %w", redact.URL(db.Admin), err)
	}
	defer server.Close(context.WithoutCancel(ctx))
	if err := waitSessionsGone(ctx, server, db.Name); err != nil {
		return r, err
	}
	commits0, rollbacks0, err := xactCounts(ctx, server, db.Name)
	if err != nil {
		return r, err
	}

	counter := NewStmtCounter()
	var mu sync.Mutex
	ages := make([]float64, 0, r.Units)
	doneOf := make(map[string]int, r.Keys)
	halfAt := make([]time.Time, 0, r.Keys)
	var firstAt time.Time
	allDone := make(chan struct{})
	events := observer.Events{StatusChanged: func(t observer.Transition) {
		if t.To != batchclaim.StateCommitted && t.To != batchclaim.StateInvalid {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if len(ages) == 0 {
			firstAt = time.Now()
		}
		ages = append(ages, t.AgeSeconds)
		if doneOf[t.ServiceID]++; doneOf[t.ServiceID] == (r.PerKey+1)/2 {
			halfAt = append(halfAt, time.Now())
		}
		if len(ages) == r.Units {
			close(allDone)
		}
	}}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var pools []*pgxpool.Pool
	defer func() {
		for _, p := range pools {
			p.Close()
		}
	}()
	var nodes []*node.Node
	for i := range c.nodes {
		cc := benchClaims(fmt.Sprintf("bench-%d", i))
		resolved, err := cc.Resolve()
		if err != nil {
			return r, err
		}
		timings := resolved.Timings()
		pool, err := openCountedPool(ctx, db.URL, int32(c.conns), counter, func(pc *pgxpool.Config) { claims.ConfigurePool(pc, timings) })
		if err != nil {
			return r, err
		}
		r.Conns = int(pool.Config().MaxConns)
		pools = append(pools, pool)
		cfg := node.Config{Claims: cc, SharePool: true, Submitter: sub, Workers: c.workers,
			BackoffBase: 10 * time.Millisecond, BackoffMax: 100 * time.Millisecond, Events: events, Logger: logger}
		tweak(&cfg)
		nodeDB, err := pgdb.Open(pool, "")
		if err != nil {
			return r, err
		}
		n, err := node.New(nodeDB, cfg)
		if err != nil {
			return r, err
		}
		nodes = append(nodes, n)
	}
	server0 := backendsUse(ctx, server, db.Name)
	start, use0 := time.Now(), processUse()
	var wg sync.WaitGroup
	errs := make(chan error, len(nodes))
	for _, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := n.Run(runCtx); err != nil && runCtx.Err() == nil {
				errs <- err
			}
		}()
	}
	select {
	case <-allDone:
	case err := <-errs:
		stop()
		wg.Wait()
		return r, fmt.Errorf("node stopped: %w", err)
	case <-ctx.Done():
		stop()
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		return r, fmt.Errorf("%d of %d done: %w", len(ages), r.Units, ctx.Err())
	}
	r.Seconds = time.Since(start).Seconds()
	r.Process = processUse().since(use0)
	r.Server = backendsUse(ctx, server, db.Name).since(server0)
	stop()
	wg.Wait()
	for _, p := range pools {
		p.Close()
	}
	pools = nil

	if err := waitSessionsGone(ctx, server, db.Name); err != nil {
		return r, err
	}
	commits1, rollbacks1, err := xactCounts(ctx, server, db.Name)
	if err != nil {
		return r, err
	}
	r.Commits, r.Rollbacks = commits1-commits0, rollbacks1-rollbacks0
	r.Statements, r.TxControl, r.ByStatement = counter.Totals(r.Units)
	slices.Sort(ages)
	r.P50Ms = round3(ages[len(ages)/2] * 1000)
	r.P99Ms = round3(ages[len(ages)*99/100] * 1000)
	// halfAt is in the order the keys got there.
	r.HalfP50 = round3(halfAt[len(halfAt)/2].Sub(start).Seconds() / r.Seconds)
	r.HalfMax = round3(halfAt[len(halfAt)-1].Sub(start).Seconds() / r.Seconds)
	r.FirstDone = round3(firstAt.Sub(start).Seconds())
	return r, nil
}

// benchStore inserts keys x perKey units through ingest.Enqueue, in the order the ingest API
// would (unit n of every key, then unit n+1), one transaction per 1,000, and disconnects. A
// fillfactor other than 0 is set on the batches table first, so that every page the units
// fill leaves that room for their rows' updates (docs/operations.md, "Fill factor").
func benchStore(ctx context.Context, dbURL string, keys, perKey, fillfactor int, payload func(string, int) (string, []byte)) error {
	pool, err := database.Open(ctx, dbURL, 1)
	if err != nil {
		return err
	}
	defer pool.Close()
	if fillfactor != 0 {
		if _, err := pool.Exec(ctx, fmt.Sprintf(`ALTER TABLE batchclaim.batches SET (fillfactor = %d)`, fillfactor)); err != nil {
			return fmt.Errorf("--fillfactor: %w", err)
		}
	}
	var tx pgx.Tx
	for i := range keys * perKey {
		if tx == nil {
			if tx, err = pool.Begin(ctx); err != nil {
				return err
			}
		}
		n, k := i/keys, i%keys
		svc := fmt.Sprintf("key-%05d", k)
		id, list := payload(svc, n)
		if id == "" {
			id, list = fmt.Sprintf("job-%d", n), []byte("{}")
		}
		if _, err := ingest.Enqueue(ctx, tx, svc, id, list); err != nil {
			_ = tx.Rollback(ctx)
			return fmt.Errorf("store: %w", err)
		}
		if i%1000 == 999 || i == keys*perKey-1 {
			if err := tx.Commit(ctx); err != nil {
				return fmt.Errorf("store: %w", err)
			}
			tx = nil
		}
	}
	return nil
}

// xactCounts reads a database's committed and rolled-back transactions. Counters reach
// pg_stat_database when a session is idle for a second or ends; take a fresh snapshot.
func xactCounts(ctx context.Context, conn *pgx.Conn, dbName string) (commits, rollbacks int64, err error) {
	if _, err := conn.Exec(ctx, `SELECT pg_stat_clear_snapshot()`); err != nil {
		return 0, 0, err
	}
	err = conn.QueryRow(ctx, `SELECT xact_commit, xact_rollback FROM pg_stat_database WHERE datname = $1`, dbName).Scan(&commits, &rollbacks)
	if err != nil {
		return 0, 0, fmt.Errorf("read pg_stat_database: %w", err)
	}
	return commits, rollbacks, nil
}

// waitSessionsGone waits until no session is connected to the database: a session flushes
// its counters when it ends at the latest.
func waitSessionsGone(ctx context.Context, conn *pgx.Conn, dbName string) error {
	deadline := time.Now().Add(15 * time.Second)
	for {
		var n int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = $1`, dbName).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d sessions still connected to %s after 15s", n, dbName)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// The claim timings of the jobs and cycle engines in this process: those of `batchclaim demo`.
const (
	claimRenew   = 200 * time.Millisecond
	claimExpiry1 = 1500 * time.Millisecond
	claimExpiry2 = 6 * time.Second
)

// use is what this process has used: CPU time (user and system, every thread) and heap
// allocations (objects, and collections of the heap).
type use struct {
	cpu         time.Duration
	allocs, gcs uint64
}

func processUse() use {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru) // only EFAULT or EINVAL, neither possible here
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return use{cpu: time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), allocs: ms.Mallocs, gcs: uint64(ms.NumGC)}
}

func (u use) since(then use) use {
	return use{cpu: u.cpu - then.cpu, allocs: u.allocs - then.allocs, gcs: u.gcs - then.gcs}
}
