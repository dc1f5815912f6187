package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// The producer scenarios, as `batchclaim bench` runs its own: enqueue (producers calling
// Insert as fast as they can while a client works), steady (producers at a fixed rate;
// latencies per window) and bulk (one InsertManyFast call of many jobs, timed). The
// producers insert through a client of their own on a pool of their own (one connection
// each), with the tuning's FetchCooldown (River notifies a queue's insert at most once per
// FetchCooldown per client); the worker client runs with the tuning on its own pool.

// producerConfig is the shape of a producer scenario.
type producerConfig struct {
	producers int
	duration  time.Duration
	rate      float64
	window    time.Duration
	bulkJobs  int
	bulkRuns  int
	// bulkUnique gives every job of the bulk scenario UniqueOpts{ByArgs: true}: River then
	// stores each job's unique key in its unique index, as batchclaim registers every job's
	// (service_id, batch_id) to skip duplicates.
	bulkUnique bool
	// steady: a session holds one REPEATABLE READ snapshot from before the producers start
	// until every job completed, so no dead row of the run can be vacuumed
	holdSnapshot bool
}

// idArgs is a job that carries the id the producer gave it, so that its start and end can
// be matched to its enqueue.
type idArgs struct {
	ID string `json:"id"`
}

func (idArgs) Kind() string { return "probe" }

// idWorker notes when each job starts.
type idWorker struct {
	river.WorkerDefaults[idArgs]
	clock *jobClock
}

func (w idWorker) Work(_ context.Context, j *river.Job[idArgs]) error {
	w.clock.note(w.clock.started, j.Args.ID, time.Now())
	return nil
}

// jobClock notes, by id, when a job's Insert began, when it started and when its completion
// event arrived.
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

// producerRig is a scratch database with River's schema, a worker client (started by
// start) and an insert-only client for the producers.
type producerRig struct {
	drop    func()
	pool    *pgxpool.Pool // the worker client's
	inPool  *pgxpool.Pool // the producers'
	worker  *river.Client[pgx.Tx]
	insert  *river.Client[pgx.Tx]
	clock   *jobClock
	unsub   func()
	stopped chan struct{}
}

func newProducerRig(ctx context.Context, serverURL string, c config, producers int) (*producerRig, error) {
	dbURL, drop, err := scratch(ctx, serverURL)
	if err != nil {
		return nil, err
	}
	r := &producerRig{drop: drop, clock: newJobClock(), stopped: make(chan struct{})}
	if r.pool, err = openPool(ctx, dbURL, c.conns); err != nil {
		r.close()
		return nil, err
	}
	if r.inPool, err = openPool(ctx, dbURL, producers); err != nil {
		r.close()
		return nil, err
	}
	migrator, err := rivermigrate.New(riverpgxv5.New(r.pool), nil)
	if err != nil {
		r.close()
		return nil, err
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		r.close()
		return nil, fmt.Errorf("migrate river schema: %w", err)
	}
	w := river.NewWorkers()
	river.AddWorker(w, idWorker{clock: r.clock})
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if r.worker, err = river.NewClient(riverpgxv5.New(r.pool), &river.Config{
		FetchCooldown:     c.t.fetchCooldown,
		FetchPollInterval: c.t.fetchPollInterval,
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: c.t.workers}},
		Workers:           w,
		Logger:            logger,
	}); err != nil {
		r.close()
		return nil, err
	}
	if r.insert, err = river.NewClient(riverpgxv5.New(r.inPool), &river.Config{
		FetchCooldown:     c.t.fetchCooldown,
		FetchPollInterval: c.t.fetchPollInterval,
		Workers:           w,
		Logger:            logger,
	}); err != nil {
		r.close()
		return nil, err
	}
	events, unsub := r.worker.SubscribeConfig(&river.SubscribeConfig{ChanSize: 1 << 20,
		Kinds: []river.EventKind{river.EventKindJobCompleted, river.EventKindJobFailed, river.EventKindJobCancelled}})
	r.unsub = unsub
	go func() {
		defer close(r.stopped)
		for e := range events {
			if e == nil {
				return
			}
			if e.Kind == river.EventKindJobCompleted {
				var a idArgs
				if err := json.Unmarshal(e.Job.EncodedArgs, &a); err == nil {
					r.clock.note(r.clock.done, a.ID, time.Now())
				}
				r.clock.ended.Add(1)
			}
		}
	}()
	return r, nil
}

func (r *producerRig) start(ctx context.Context) error { return r.worker.Start(ctx) }

func (r *producerRig) close() {
	if r.worker != nil {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_ = r.worker.Stop(sctx)
		cancel()
	}
	if r.unsub != nil {
		r.unsub()
	}
	for _, p := range []*pgxpool.Pool{r.inPool, r.pool} {
		if p != nil {
			p.Close()
		}
	}
	r.drop()
}

// waitEnded waits until n jobs completed, at most limit.
func (r *producerRig) waitEnded(ctx context.Context, n int64, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for r.clock.ended.Load() < n {
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d jobs completed after %s", r.clock.ended.Load(), n, limit)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil
}

// produce is `batchclaim bench`'s: producers goroutines insert job after job for d; rate > 0
// paces them (job n due n/rate seconds from the start, a late one at once).
func produce(ctx context.Context, producers int, d time.Duration, rate float64, clock *jobClock,
	insert func(ctx context.Context, id string) error) (n int, calls []time.Duration, err error) {
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
				if err := insert(ctx, id); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = fmt.Errorf("insert %s: %w", id, err)
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

// enqueueResult is the river-enqueue line, in the shape of batchclaim's enqueue line.
type enqueueResult struct {
	Scenario      string  `json:"scenario"`
	Tuning        string  `json:"tuning"`
	RiverVersion  string  `json:"river_version"`
	Workers       int     `json:"workers"`
	FetchCooldown float64 `json:"fetch_cooldown_ms"`
	FetchPoll     float64 `json:"fetch_poll_interval_ms"`
	Conns         int     `json:"conns"`
	Producers     int     `json:"producers"`
	Method        string  `json:"method"`
	Jobs          int     `json:"jobs"`
	Seconds       float64 `json:"seconds"`
	JobsPerSecond float64 `json:"jobs_per_second"`
	CallP50Ms     float64 `json:"call_p50_ms"`
	CallP99Ms     float64 `json:"call_p99_ms"`
	CallMaxMs     float64 `json:"call_max_ms"`
	EndedInWindow int64   `json:"ended_while_producing"`
}

func (r *enqueueResult) settings(name string, c config, conns int) {
	r.Tuning, r.RiverVersion, r.Workers, r.Conns = name, riverVersion(), c.t.workers, conns
	r.FetchCooldown, r.FetchPoll = ms(c.t.fetchCooldown), ms(c.t.fetchPollInterval)
}

// runEnqueue: producers call Insert as fast as they can while the worker client works.
func runEnqueue(ctx context.Context, serverURL string, c config, pc producerConfig) (enqueueResult, error) {
	r := enqueueResult{Scenario: "river-enqueue", Producers: pc.producers, Method: "producers goroutines call Insert (one job, " +
		"no transaction of their own) as fast as they can through an insert-only client on a pool of their own (one " +
		"connection each), while the worker client (the tuning) works the jobs off"}
	rig, err := newProducerRig(ctx, serverURL, c, pc.producers)
	if err != nil {
		return r, err
	}
	defer rig.close()
	r.settings(c.tuning, c, int(rig.pool.Config().MaxConns))
	if err := rig.start(ctx); err != nil {
		return r, err
	}
	start := time.Now()
	n, calls, err := produce(ctx, pc.producers, pc.duration, 0, nil, func(ctx context.Context, id string) error {
		_, err := rig.insert.Insert(ctx, idArgs{ID: id}, nil)
		return err
	})
	r.Seconds = round3(time.Since(start).Seconds())
	r.EndedInWindow = rig.clock.ended.Load()
	if err != nil {
		return r, err
	}
	r.Jobs = n
	r.JobsPerSecond = round3(float64(n) / r.Seconds)
	r.CallP50Ms, r.CallP99Ms, r.CallMaxMs = durQuantiles(calls)
	return r, nil
}

// steadyWindow is one window of arrivals and their latencies (the same fields as batchclaim's).
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

// steadyResult is the river-steady line.
type steadyResult struct {
	enqueueResult
	Rate          float64        `json:"rate_asked"`
	RateAchieved  float64        `json:"rate_achieved"`
	WindowSeconds float64        `json:"window_s"`
	HeldSnapshot  bool           `json:"held_snapshot"`
	All           steadyWindow   `json:"all"`
	Windows       []steadyWindow `json:"windows"`
}

// runSteady: producers insert at a fixed rate; latencies per window of arrival.
func runSteady(ctx context.Context, serverURL string, c config, pc producerConfig) (steadyResult, error) {
	r := steadyResult{enqueueResult: enqueueResult{Scenario: "river-steady", Producers: pc.producers, Method: "producers goroutines " +
		"call Insert at a fixed arrival rate (job n due n/rate seconds from the start, a late one at once) through an insert-only " +
		"client on a pool of their own, while the worker client (the tuning) works; each job's latency runs from the start of its " +
		"Insert call to its Work call (start) and to its job_completed event (done), in this process's clock, grouped by the " +
		"window its Insert began in"}, Rate: pc.rate, WindowSeconds: pc.window.Seconds()}
	rig, err := newProducerRig(ctx, serverURL, c, pc.producers)
	if err != nil {
		return r, err
	}
	defer rig.close()
	r.settings(c.tuning, c, int(rig.pool.Config().MaxConns))
	if err := rig.start(ctx); err != nil {
		return r, err
	}
	if pc.holdSnapshot {
		release, err := holdSnapshot(ctx, rig.pool)
		if err != nil {
			return r, err
		}
		defer release()
		r.HeldSnapshot = true
	}
	start := time.Now()
	n, calls, err := produce(ctx, pc.producers, pc.duration, pc.rate, rig.clock, func(ctx context.Context, id string) error {
		_, err := rig.insert.Insert(ctx, idArgs{ID: id}, nil)
		return err
	})
	if err != nil {
		return r, err
	}
	r.Jobs, r.Seconds = n, round3(time.Since(start).Seconds())
	r.CallP50Ms, r.CallP99Ms, r.CallMaxMs = durQuantiles(calls)
	r.RateAchieved = round3(float64(n) / r.Seconds)
	if err := rig.waitEnded(ctx, int64(n), time.Minute); err != nil {
		return r, err
	}
	rig.clock.mu.Lock()
	defer rig.clock.mu.Unlock()
	r.Windows, r.All, err = steadyWindows(start, pc.window, rig.clock.sent, rig.clock.started, rig.clock.done)
	return r, err
}

// holdSnapshot opens a REPEATABLE READ transaction on a connection of its own and reads in
// it, so the session holds one snapshot (its backend_xmin) until release (as batchclaim's
// steady scenario does with --steady-hold-snapshot).
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

// bulkResult is the river-bulk line.
type bulkResult struct {
	Scenario      string    `json:"scenario"`
	RiverVersion  string    `json:"river_version"`
	Method        string    `json:"method"`
	UniqueByArgs  bool      `json:"unique_by_args"`
	JobsPerCall   int       `json:"jobs_per_call"`
	Calls         int       `json:"calls"`
	CallSeconds   []float64 `json:"call_seconds"`
	BestSeconds   float64   `json:"best_seconds"`
	MedianSeconds float64   `json:"median_seconds"`
	JobsPerSecond float64   `json:"jobs_per_second"`
}

// runBulk times InsertManyFast calls of pc.bulkJobs jobs each, no client working.
func runBulk(ctx context.Context, serverURL string, c config, pc producerConfig) (bulkResult, error) {
	r := bulkResult{Scenario: "river-bulk", RiverVersion: riverVersion(), UniqueByArgs: pc.bulkUnique, JobsPerCall: pc.bulkJobs, Calls: pc.bulkRuns,
		Method: "InsertManyFast (COPY) of jobs_per_call jobs in one call, its own transaction, no client working; " +
			"each call timed from its start to its return; jobs_per_second from the median call"}
	rig, err := newProducerRig(ctx, serverURL, c, 1)
	if err != nil {
		return r, err
	}
	defer rig.close()
	for run := range pc.bulkRuns {
		params := make([]river.InsertManyParams, pc.bulkJobs)
		for i := range params {
			params[i] = river.InsertManyParams{Args: idArgs{ID: fmt.Sprintf("bulk-%d-%d", run, i)}}
			if pc.bulkUnique {
				params[i].InsertOpts = &river.InsertOpts{UniqueOpts: river.UniqueOpts{ByArgs: true}}
			}
		}
		t := time.Now()
		n, err := rig.insert.InsertManyFast(ctx, params)
		if err != nil {
			return r, err
		}
		if n != pc.bulkJobs {
			return r, fmt.Errorf("InsertManyFast stored %d of %d jobs", n, pc.bulkJobs)
		}
		r.CallSeconds = append(r.CallSeconds, round3(time.Since(t).Seconds()))
	}
	sorted := slices.Sorted(slices.Values(r.CallSeconds))
	r.BestSeconds, r.MedianSeconds = sorted[0], sorted[len(sorted)/2]
	r.JobsPerSecond = round3(float64(pc.bulkJobs) / r.MedianSeconds)
	return r, nil
}

// steadyWindows groups the jobs by when their Insert began, in windows of w from start.
func steadyWindows(start time.Time, w time.Duration, sent, started, done map[string]time.Time) ([]steadyWindow, steadyWindow, error) {
	type lat struct{ start, done []float64 }
	var wins []lat
	var all lat
	for id, t := range sent {
		s, ok1 := started[id]
		e, ok2 := done[id]
		if !ok1 || !ok2 {
			return nil, steadyWindow{}, fmt.Errorf("job %s inserted but not completed", id)
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

func quantiles(xs []float64) (p50, p99, maxX float64) {
	if len(xs) == 0 {
		return 0, 0, 0
	}
	slices.Sort(xs)
	return round3(xs[len(xs)/2]), round3(xs[len(xs)*99/100]), round3(xs[len(xs)-1])
}

func durQuantiles(ds []time.Duration) (p50, p99, maxMs float64) {
	xs := make([]float64, len(ds))
	for i, d := range ds {
		xs[i] = float64(d.Microseconds()) / 1000
	}
	return quantiles(xs)
}
