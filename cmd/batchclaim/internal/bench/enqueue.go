package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/claims"
	"github.com/batchclaim/batchclaim/cmd/batchclaim/internal/database"
	"github.com/batchclaim/batchclaim/ingest"
	"github.com/batchclaim/batchclaim/node"
	"github.com/batchclaim/batchclaim/observer"
	"github.com/batchclaim/batchclaim/pgdb"
	"github.com/batchclaim/batchclaim/submitter"
)

// The producer scenarios (enqueue, bulk, steady) measure what an application that enqueues
// sees: jobs stored while nodes with run's defaults work them off. Their River counterparts
// are in bench/river (the same scenario names), run beside them by make bench.

// producerConfig is the shape of the enqueue, bulk and steady scenarios.
type producerConfig struct {
	producers int           // goroutines that enqueue, on a pool of their own (one connection each)
	keys      int           // service_ids the jobs go to, in turn
	nodes     int           // nodes working the jobs off, with run's defaults
	duration  time.Duration // enqueue, steady: how long the producers run
	rate      float64       // steady: jobs per second asked for
	window    time.Duration // steady: the latencies are reported per window of arrival
	bulkJobs  int           // bulk: jobs of one call
	bulkRuns  int           // bulk: calls, each timed
	// bulk: the jobs have no id (an empty BatchID), so none is registered to find repeats:
	// what River's InsertManyFast stores, where the default gives each job an id
	bulkWithoutIDs bool
	// steady: a session of the scratch database holds one REPEATABLE READ snapshot from before
	// the producers start until every job ended, so no dead row of the run can be vacuumed
	holdSnapshot bool
	keep         bool
}

// producerNodes is the scenario's scratch database with its nodes running, and what they
// report: when each job started and finished, by batch id.
type producerNodes struct {
	db      *database.Scratch
	admin   *pgxpool.Pool
	pools   []*pgxpool.Pool
	stop    context.CancelFunc
	wg      sync.WaitGroup
	errs    chan error
	clock   *jobClock
	nodeCfg node.Config // the first node's, with its defaults resolved, for the JSON line
}

// jobClock notes, by batch id, when a job's enqueue call began, when its Submitter was called
// and when its end was recorded (the node's StatusChanged event, after the write committed).
type jobClock struct {
	mu      sync.Mutex
	sent    map[string]time.Time
	started map[string]time.Time
	done    map[string]time.Time
	ended   atomic.Int64
}

func newJobClock() *jobClock {
	return &jobClock{sent: map[string]time.Time{}, started: map[string]time.Time{}, done: map[string]time.Time{}}
}

func (c *jobClock) note(m map[string]time.Time, id string, t time.Time) {
	c.mu.Lock()
	m[id] = t
	c.mu.Unlock()
}

// startProducerNodes creates the scratch database, registers the keys, starts the nodes with
// run's defaults (a Submitter that does nothing and says Done) and waits until they hold
// every key, each its fair share, so that the producers measure the steady state.
func startProducerNodes(ctx context.Context, c producerConfig, prefix string, ids []string, info io.Writer) (*producerNodes, error) {
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	db, admin, err := scratchWithAdmin(ctx, prefix, c.keep, info)
	if err != nil {
		return nil, err
	}
	p := &producerNodes{db: db, admin: admin, errs: make(chan error, c.nodes), clock: newJobClock()}
	if err := claims.RegisterServiceIDs(ctx, admin, ids...); err != nil {
		p.close(ctx)
		return nil, err
	}
	sub := submitter.SubmitterFunc(func(_ context.Context, b batchclaim.Batch) (batchclaim.Result, error) {
		p.clock.note(p.clock.started, b.BatchID, time.Now())
		return batchclaim.Result{Verdict: batchclaim.Done}, nil
	})
	events := observer.Events{StatusChanged: func(t observer.Transition) {
		if t.To == batchclaim.StateCommitted {
			p.clock.note(p.clock.done, t.BatchID, time.Now())
			p.clock.ended.Add(1)
		}
	}}
	runCtx, stop := context.WithCancel(ctx)
	p.stop = stop
	for i := range c.nodes {
		cc := claims.Config{Name: fmt.Sprintf("bench-%d", i)}
		resolved, err := cc.Resolve()
		if err != nil {
			p.close(ctx)
			return nil, err
		}
		timings := resolved.Timings()
		pool, err := database.Open(ctx, db.URL, int32(max(4, runtime.NumCPU())), func(pc *pgxpool.Config) { claims.ConfigurePool(pc, timings) })
		if err != nil {
			p.close(ctx)
			return nil, err
		}
		p.pools = append(p.pools, pool)
		cfg := node.Config{Claims: cc, SharePool: true, Submitter: sub, Events: events, Logger: logger}
		if i == 0 {
			if p.nodeCfg, err = cfg.Resolve(); err != nil {
				p.close(ctx)
				return nil, err
			}
		}
		nodeDB, err := pgdb.Open(pool, "")
		if err != nil {
			p.close(ctx)
			return nil, err
		}
		n, err := node.New(nodeDB, cfg)
		if err != nil {
			p.close(ctx)
			return nil, err
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			if err := n.Run(runCtx); err != nil && runCtx.Err() == nil {
				p.errs <- err
			}
		}()
	}
	began := time.Now()
	deadline := began.Add(2 * time.Minute)
	for {
		// Every key held, by every node, each holding its fair share (within one): a node that
		// started first takes every key and gives half back at a later cycle, and jobs of the
		// keys in between wait for the handover; the scenarios measure what comes after.
		var held, holders, most, least int
		if err := admin.QueryRow(ctx, `SELECT COALESCE(sum(n), 0), count(*), COALESCE(max(n), 0), COALESCE(min(n), 0)
			FROM (SELECT count(*) AS n FROM batchclaim.service_id_claims WHERE claimant IS NOT NULL GROUP BY claimant) h`).
			Scan(&held, &holders, &most, &least); err != nil {
			p.close(ctx)
			return nil, err
		}
		if held == len(ids) && holders == c.nodes && most-least <= 1 {
			fmt.Fprintf(info, "the %d nodes hold the %d keys, %d to %d each, after %.1f s\n", holders, held, least, most, time.Since(began).Seconds())
			return p, nil
		}
		if err := p.failed(); err != nil {
			p.close(ctx)
			return nil, err
		}
		if time.Now().After(deadline) {
			p.close(ctx)
			return nil, fmt.Errorf("after 2 minutes the %d nodes hold %d of %d keys, %d nodes %d to %d each", c.nodes, held, len(ids), holders, least, most)
		}
		select {
		case <-ctx.Done():
			p.close(ctx)
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// failed returns a node's error, if one stopped.
func (p *producerNodes) failed() error {
	select {
	case err := <-p.errs:
		return fmt.Errorf("node stopped: %w", err)
	default:
		return nil
	}
}

// waitEnded waits until n jobs ended, at most limit.
func (p *producerNodes) waitEnded(ctx context.Context, n int64, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for p.clock.ended.Load() < n {
		if err := p.failed(); err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d jobs ended after %s", p.clock.ended.Load(), n, limit)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil
}

func (p *producerNodes) close(ctx context.Context) {
	if p.stop != nil {
		p.stop()
		p.wg.Wait()
	}
	for _, pool := range p.pools {
		pool.Close()
	}
	p.admin.Close()
	p.db.Close(ctx)
}

// produce runs producers goroutines for d, each enqueueing job after job through insert, to
// key n mod len(keys) for the n-th job. rate > 0 paces them: job n is not enqueued before
// n/rate seconds from the start (an open arrival process: a late job goes at once). It
// returns the jobs enqueued and each enqueue call's duration.
func produce(ctx context.Context, producers int, keys []string, d time.Duration, rate float64, clock *jobClock,
	insert func(ctx context.Context, key, id string) error) (n int, calls []time.Duration, err error) {
	var next atomic.Int64
	var mu sync.Mutex
	var firstErr error
	start := time.Now()
	end := start.Add(d)
	var wg sync.WaitGroup
	for range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			defer func() {
				mu.Lock()
				calls = append(calls, mine...)
				mu.Unlock()
			}()
			for ctx.Err() == nil {
				i := next.Add(1) - 1
				if rate > 0 {
					due := start.Add(time.Duration(float64(i) / rate * float64(time.Second)))
					if !due.Before(end) {
						return
					}
					if wait := time.Until(due); wait > 0 {
						select {
						case <-ctx.Done():
							return
						case <-time.After(wait):
						}
					}
				} else if !time.Now().Before(end) {
					return
				}
				id := fmt.Sprintf("job-%d", i)
				t := time.Now()
				if clock != nil {
					clock.note(clock.sent, id, t)
				}
				if err := insert(ctx, keys[int(i)%len(keys)], id); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = fmt.Errorf("enqueue %s: %w", id, err)
					}
					mu.Unlock()
					return
				}
				mine = append(mine, time.Since(t))
			}
		}()
	}
	wg.Wait()
	if firstErr == nil && ctx.Err() != nil {
		firstErr = ctx.Err()
	}
	return len(calls), calls, firstErr
}

// durQuantiles are p50, p99 and max of ds in milliseconds.
func durQuantiles(ds []time.Duration) (p50, p99, maxMs float64) {
	xs := make([]float64, len(ds))
	for i, d := range ds {
		xs[i] = float64(d.Microseconds()) / 1000
	}
	return quantiles(xs)
}

// steadyWindow is one window of the steady scenario: the jobs that arrived in it and their
// latencies from the start of their enqueue call.
type steadyWindow struct {
	FromSeconds float64 `json:"from_s"`
	Jobs        int     `json:"jobs"`
	StartP50Ms  float64 `json:"enqueue_to_start_p50_ms"`
	StartP99Ms  float64 `json:"enqueue_to_start_p99_ms"`
	StartMaxMs  float64 `json:"enqueue_to_start_max_ms"`
	DoneP50Ms   float64 `json:"enqueue_to_done_p50_ms"`
	DoneP99Ms   float64 `json:"enqueue_to_done_p99_ms"`
	DoneMaxMs   float64 `json:"enqueue_to_done_max_ms"`
}

// steadyWindows groups the jobs by when their enqueue began, in windows of w from start.
// Every job must have started and ended.
func steadyWindows(start time.Time, w time.Duration, sent, started, done map[string]time.Time) ([]steadyWindow, steadyWindow, error) {
	type lat struct{ start, done []float64 }
	var wins []lat
	var all lat
	for id, t := range sent {
		s, ok1 := started[id]
		e, ok2 := done[id]
		if !ok1 || !ok2 {
			return nil, steadyWindow{}, fmt.Errorf("job %s enqueued but not ended", id)
		}
		i := int(t.Sub(start) / w)
		for len(wins) <= i {
			wins = append(wins, lat{})
		}
		sm, dm := float64(s.Sub(t).Microseconds())/1000, float64(e.Sub(t).Microseconds())/1000
		wins[i].start, wins[i].done = append(wins[i].start, sm), append(wins[i].done, dm)
		all.start, all.done = append(all.start, sm), append(all.done, dm)
	}
	sum := func(from float64, l lat) steadyWindow {
		x := steadyWindow{FromSeconds: from, Jobs: len(l.start)}
		x.StartP50Ms, x.StartP99Ms, x.StartMaxMs = quantiles(l.start)
		x.DoneP50Ms, x.DoneP99Ms, x.DoneMaxMs = quantiles(l.done)
		return x
	}
	out := make([]steadyWindow, len(wins))
	for i, l := range wins {
		out[i] = sum(float64(i)*w.Seconds(), l)
	}
	return out, sum(0, all), nil
}

// enqueueResult is the enqueue scenario's JSON line.
type enqueueResult struct {
	Scenario      string  `json:"scenario"`
	Producers     int     `json:"producers"`
	Keys          int     `json:"keys"`
	Nodes         int     `json:"nodes"`
	NodeWorkers   int     `json:"workers_per_node"`
	Method        string  `json:"method"`
	Jobs          int     `json:"jobs"`
	Seconds       float64 `json:"seconds"`
	JobsPerSecond float64 `json:"jobs_per_second"`
	CallP50Ms     float64 `json:"call_p50_ms"`
	CallP99Ms     float64 `json:"call_p99_ms"`
	CallMaxMs     float64 `json:"call_max_ms"`
	EndedInWindow int64   `json:"ended_while_producing"`
}

const enqueueMethod = "producers goroutines call ingest.Enqueue (one job, no transaction of their own) as fast as they can " +
	"on a pool of their own (one connection each), to the keys in turn, while the nodes (run's defaults, a Submitter " +
	"that does nothing) hold every key, each its fair share, and work the jobs off; jobs enqueued over the seconds they ran"

func (r enqueueResult) print(w io.Writer) {
	fmt.Fprintf(w, "enqueue: %d producers calling ingest.Enqueue as fast as they can over %d keys, %d nodes (run's defaults, %d workers each) working\n",
		r.Producers, r.Keys, r.Nodes, r.NodeWorkers)
	fmt.Fprintf(w, "  %d jobs in %.1fs: %.0f jobs/s; call p50 %.2f ms, p99 %.2f ms, max %.1f ms; %d ended meanwhile\n\n",
		r.Jobs, r.Seconds, r.JobsPerSecond, r.CallP50Ms, r.CallP99Ms, r.CallMaxMs, r.EndedInWindow)
}

// benchEnqueue: producers enqueue single jobs as fast as they can while nodes work.
func benchEnqueue(ctx context.Context, c producerConfig, info io.Writer) (enqueueResult, error) {
	r := enqueueResult{Scenario: "enqueue", Producers: c.producers, Keys: c.keys, Nodes: c.nodes, Method: enqueueMethod}
	keys := serviceIDs("key", c.keys)
	p, err := startProducerNodes(ctx, c, "batchclaim_bench_enqueue", keys, info)
	if err != nil {
		return r, err
	}
	defer p.close(ctx)
	r.NodeWorkers = p.nodeCfg.Workers
	pool, err := database.Open(ctx, p.db.URL, int32(c.producers))
	if err != nil {
		return r, err
	}
	defer pool.Close()
	start := time.Now()
	n, calls, err := produce(ctx, c.producers, keys, c.duration, 0, nil, func(ctx context.Context, key, id string) error {
		_, err := ingest.Enqueue(ctx, pool, key, id, []byte("{}"))
		return err
	})
	r.Seconds = round3(time.Since(start).Seconds())
	r.EndedInWindow = p.clock.ended.Load()
	if err != nil {
		return r, err
	}
	if err := p.failed(); err != nil {
		return r, err
	}
	r.Jobs = n
	r.JobsPerSecond = round3(float64(n) / r.Seconds)
	r.CallP50Ms, r.CallP99Ms, r.CallMaxMs = durQuantiles(calls)
	return r, nil
}

// steadyResult is the steady scenario's JSON line.
type steadyResult struct {
	Scenario      string         `json:"scenario"`
	Rate          float64        `json:"rate_asked"`
	RateAchieved  float64        `json:"rate_achieved"`
	Producers     int            `json:"producers"`
	Keys          int            `json:"keys"`
	Nodes         int            `json:"nodes"`
	NodeWorkers   int            `json:"workers_per_node"`
	Method        string         `json:"method"`
	Jobs          int            `json:"jobs"`
	Seconds       float64        `json:"seconds"`
	CallP50Ms     float64        `json:"call_p50_ms"`
	CallP99Ms     float64        `json:"call_p99_ms"`
	CallMaxMs     float64        `json:"call_max_ms"`
	WindowSeconds float64        `json:"window_s"`
	HeldSnapshot  bool           `json:"held_snapshot"`
	All           steadyWindow   `json:"all"`
	Windows       []steadyWindow `json:"windows"`
}

const steadyMethod = "producers goroutines enqueue (ingest.Enqueue, one job a call) at a fixed arrival rate (job n due n/rate " +
	"seconds from the start, a late one at once), to the keys in turn, while the nodes (run's defaults, a Submitter that " +
	"does nothing) hold every key, each its fair share; each job's latency runs from the start of its enqueue call to its Submitter's call " +
	"(start) and to the StatusChanged event of its COMMITTED write (done), in this process's clock, grouped by the " +
	"window its enqueue began in"

func (r steadyResult) print(w io.Writer) {
	fmt.Fprintf(w, "steady: %.0f jobs/s asked (%.0f achieved) by %d producers over %d keys, %d nodes (run's defaults, %d workers each)\n",
		r.Rate, r.RateAchieved, r.Producers, r.Keys, r.Nodes, r.NodeWorkers)
	if r.HeldSnapshot {
		fmt.Fprintln(w, "  a REPEATABLE READ snapshot held for the whole run: no dead row of it could be vacuumed")
	}
	fmt.Fprintf(w, "  enqueue call p50 %.2f ms, p99 %.2f ms, max %.1f ms\n", r.CallP50Ms, r.CallP99Ms, r.CallMaxMs)
	fmt.Fprintf(w, "  %-8s %6s %22s %22s\n", "from s", "jobs", "start p50/p99/max ms", "done p50/p99/max ms")
	for i, x := range append(slices.Clip(r.Windows), r.All) {
		from := fmt.Sprintf("%.0f", x.FromSeconds)
		if i == len(r.Windows) {
			from = "all"
		}
		fmt.Fprintf(w, "  %-8s %6d %8.1f/%5.1f/%6.1f %8.1f/%5.1f/%6.1f\n", from, x.Jobs,
			x.StartP50Ms, x.StartP99Ms, x.StartMaxMs, x.DoneP50Ms, x.DoneP99Ms, x.DoneMaxMs)
	}
	fmt.Fprintln(w)
}

// benchSteady: producers enqueue at a fixed rate; latencies per window.
func benchSteady(ctx context.Context, c producerConfig, info io.Writer) (steadyResult, error) {
	r := steadyResult{Scenario: "steady", Rate: c.rate, Producers: c.producers, Keys: c.keys, Nodes: c.nodes,
		Method: steadyMethod, WindowSeconds: c.window.Seconds()}
	keys := serviceIDs("key", c.keys)
	p, err := startProducerNodes(ctx, c, "batchclaim_bench_steady", keys, info)
	if err != nil {
		return r, err
	}
	defer p.close(ctx)
	r.NodeWorkers = p.nodeCfg.Workers
	pool, err := database.Open(ctx, p.db.URL, int32(c.producers))
	if err != nil {
		return r, err
	}
	defer pool.Close()
	if c.holdSnapshot {
		release, err := holdSnapshot(ctx, pool)
		if err != nil {
			return r, err
		}
		defer release()
		r.HeldSnapshot = true
	}
	start := time.Now()
	n, calls, err := produce(ctx, c.producers, keys, c.duration, c.rate, p.clock, func(ctx context.Context, key, id string) error {
		_, err := ingest.Enqueue(ctx, pool, key, id, []byte("{}"))
		return err
	})
	if err != nil {
		return r, err
	}
	r.Jobs, r.Seconds = n, round3(time.Since(start).Seconds())
	r.CallP50Ms, r.CallP99Ms, r.CallMaxMs = durQuantiles(calls)
	r.RateAchieved = round3(float64(n) / r.Seconds)
	if err := p.waitEnded(ctx, int64(n), time.Minute); err != nil {
		return r, err
	}
	p.clock.mu.Lock()
	defer p.clock.mu.Unlock()
	r.Windows, r.All, err = steadyWindows(start, c.window, p.clock.sent, p.clock.started, p.clock.done)
	return r, err
}

// holdSnapshot opens a REPEATABLE READ transaction on a connection of its own and reads in
// it, so the session holds one snapshot (its backend_xmin) until release: what a long report
// or a forgotten transaction does to a queue's table, whose dead rows vacuum may not remove
// while the snapshot could still see them.
func holdSnapshot(ctx context.Context, pool *pgxpool.Pool) (release func(), err error) {
	conn, err := pgx.ConnectConfig(ctx, pool.Config().ConnConfig.Copy())
	if err != nil {
		return nil, fmt.Errorf("hold a snapshot: %w", err)
	}
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	var held bool
	if err == nil {
		err = tx.QueryRow(ctx, `SELECT backend_xmin IS NOT NULL FROM pg_stat_activity WHERE pid = pg_backend_pid()`).Scan(&held)
	}
	if err == nil && !held {
		err = errors.New("the session shows no backend_xmin")
	}
	if err != nil {
		_ = conn.Close(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("hold a snapshot: %w", err)
	}
	return func() {
		ctx := context.WithoutCancel(ctx)
		_ = tx.Rollback(ctx)
		_ = conn.Close(ctx)
	}, nil
}

// bulkResult is the bulk scenario's JSON line.
type bulkResult struct {
	Scenario      string    `json:"scenario"`
	Method        string    `json:"method"`
	Keys          int       `json:"keys"`
	JobsPerCall   int       `json:"jobs_per_call"`
	WithoutIDs    bool      `json:"without_ids"`
	Calls         int       `json:"calls"`
	CallSeconds   []float64 `json:"call_seconds"`
	BestSeconds   float64   `json:"best_seconds"`
	MedianSeconds float64   `json:"median_seconds"`
	JobsPerSecond float64   `json:"jobs_per_second"`
}

const bulkMethod = "ingest.EnqueueMany of jobs_per_call jobs over keys keys (jobs_per_call/keys each, the keys in turn) in one " +
	"call, given the pool (its own transaction), no node working; each job with an id of its own, registered to skip repeats, " +
	"or with without_ids none; each call timed from its start to its return; jobs_per_second from the median call"

func (r bulkResult) print(w io.Writer) {
	ids := "each with an id"
	if r.WithoutIDs {
		ids = "without ids"
	}
	fmt.Fprintf(w, "bulk: ingest.EnqueueMany of %d jobs (%s) over %d keys in one call, %d calls\n", r.JobsPerCall, ids, r.Keys, r.Calls)
	fmt.Fprintf(w, "  seconds a call %v: best %.3f, median %.3f: %.0f jobs/s\n\n", r.CallSeconds, r.BestSeconds, r.MedianSeconds, r.JobsPerSecond)
}

// benchBulk times EnqueueMany calls of c.bulkJobs jobs each.
func benchBulk(ctx context.Context, c producerConfig, info io.Writer) (bulkResult, error) {
	r := bulkResult{Scenario: "bulk", Method: bulkMethod, Keys: c.keys, JobsPerCall: c.bulkJobs, WithoutIDs: c.bulkWithoutIDs, Calls: c.bulkRuns}
	db, admin, err := scratchWithAdmin(ctx, "batchclaim_bench_bulk", c.keep, info)
	if err != nil {
		return r, err
	}
	defer db.Close(ctx)
	defer admin.Close()
	keys := serviceIDs("key", c.keys)
	for run := range c.bulkRuns {
		jobs := make([]ingest.Job, c.bulkJobs)
		for i := range jobs {
			jobs[i] = ingest.Job{ServiceID: keys[i%len(keys)], Payload: []byte("{}")}
			if !c.bulkWithoutIDs {
				jobs[i].BatchID = fmt.Sprintf("bulk-%d-%d", run, i)
			}
		}
		t := time.Now()
		stored, err := ingest.EnqueueMany(ctx, admin, jobs)
		if err != nil {
			return r, err
		}
		r.CallSeconds = append(r.CallSeconds, round3(time.Since(t).Seconds()))
		for i, s := range stored {
			if !s.New {
				return r, fmt.Errorf("job %d reported as a duplicate", i)
			}
		}
	}
	sorted := slices.Sorted(slices.Values(r.CallSeconds))
	r.BestSeconds, r.MedianSeconds = sorted[0], sorted[len(sorted)/2]
	r.JobsPerSecond = round3(float64(c.bulkJobs) / r.MedianSeconds)
	return r, nil
}
