package singleflightcmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batchclaim/batchclaim/cmd/batchclaim/internal/cli"
	"github.com/batchclaim/batchclaim/cmd/batchclaim/internal/database"
	"github.com/batchclaim/batchclaim/patterns/singleflight"
	"github.com/batchclaim/batchclaim/pgdb"
)

// sfWorker is one process of `singleflight demo`: callers Get the demo's keys through a
// shared Cache whose slow fake source records every call in the database.
func sfWorker(ctx context.Context, args []string, _, stderr io.Writer) error {
	fs := cli.NewFlagSet("singleflight worker", "[flags]", "One worker process of `batchclaim singleflight demo`.", stderr)
	dbURL := database.Flag(fs)
	schema := database.SchemaFlag(fs)
	name := fs.String("name", "worker", "this worker's name in the demo's record")
	keys := fs.Int("keys", 6, "keys besides "+sfVictimKey)
	callers := fs.Int("callers", 3, "concurrent callers of Get")
	duration := fs.Duration("duration", 15*time.Second, "how long to keep calling Get")
	fetchTime := fs.Duration("fetch-time", 300*time.Millisecond, "how long one source call takes")
	ttl := fs.Duration("ttl", 2*time.Second, "how long a fetched value is fresh")
	lease := fs.Duration("lease", 1500*time.Millisecond, "fetch lease")
	hangKey := fs.String("hang-key", "", "a key whose source call never returns in this worker")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	pool, err := database.Open(ctx, *dbURL, int32(*callers+4))
	if err != nil {
		return err
	}
	defer pool.Close()

	db, err := pgdb.Open(pool, *schema)
	if err != nil {
		return err
	}
	src := &sfDemoSource{pool: pool, worker: *name, fetchTime: *fetchTime, hangKey: *hangKey}
	cache, err := singleflight.New(db, src, singleflight.Config{
		Holder: *name, TTL: *ttl, LeaseTTL: *lease, ErrorTTL: *ttl / 4, Logger: logger,
	})
	if err != nil {
		return err
	}
	runCtx, stopRun := context.WithCancel(ctx)
	ran := make(chan struct{})
	go func() {
		defer close(ran)
		_ = cache.Run(runCtx)
	}()

	w := &sfWorkerState{name: *name, pool: pool, cache: cache, logger: logger}
	keyNames := []string{sfVictimKey}
	for i := range *keys {
		keyNames = append(keyNames, fmt.Sprintf("key-%d", i))
	}
	getTimeout := 10*(*lease) + 5*time.Second // a Get that outlasts this is lost
	end := time.Now().Add(*duration)
	var wg sync.WaitGroup
	for i := range *callers {
		wg.Go(func() {
			if i == 0 { // every worker's first Get is the slow key
				w.victimPending.Store(true)
				e, ok := w.get(ctx, sfVictimKey, getTimeout, false)
				w.victimPending.Store(false)
				if ok {
					w.victimEpoch.Store(e.Epoch)
				}
			}
			for time.Now().Before(end) && ctx.Err() == nil {
				key := keyNames[rand.IntN(len(keyNames))]
				w.get(ctx, key, getTimeout, rand.IntN(4) == 0)
				select { // pace the callers: a few Gets per second each
				case <-ctx.Done():
				case <-time.After(time.Duration(20+rand.IntN(80)) * time.Millisecond):
				}
			}
		})
	}
	flushed := make(chan struct{})
	flushCtx, stopFlush := context.WithCancel(ctx)
	go func() {
		defer close(flushed)
		for {
			w.flush(flushCtx, false)
			select {
			case <-flushCtx.Done():
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	wg.Wait()
	stopFlush()
	<-flushed
	stopRun()
	<-ran
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := w.flush(fctx, true); err != nil {
		return fmt.Errorf("report the end: %w", err)
	}
	st := cache.Stats()
	logger.Info("worker done", "gets", w.gets.Load(), "errors", w.errors.Load(), "fetches", st.Fetches, "takeovers", st.Takeovers)
	return ctx.Err()
}

type sfWorkerState struct {
	name   string
	pool   *pgxpool.Pool
	cache  *singleflight.Cache
	logger *slog.Logger

	gets, errors, stale atomic.Int64
	victimPending       atomic.Bool
	victimEpoch         atomic.Int64
}

// get calls Get and counts the outcome; any error, including a timeout, is a lost result.
func (w *sfWorkerState) get(ctx context.Context, key string, timeout time.Duration, allowStale bool) (singleflight.Entry, bool) {
	gctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var opts []singleflight.GetOption
	if allowStale {
		opts = append(opts, singleflight.AllowStale())
	}
	w.gets.Add(1)
	e, err := w.cache.Get(gctx, key, opts...)
	if err != nil {
		if ctx.Err() == nil {
			w.errors.Add(1)
			w.logger.Error("get failed", "key", key, "error", err)
		}
		return e, false
	}
	if e.Stale {
		w.stale.Add(1)
	}
	return e, true
}

// sfReportSQL stores a worker's counters: $1 name, $2 done, $3 victim_pending, $4
// victim_epoch, $5 gets, $6 errors, $7 stale, $8 takeovers, $9 notify_wakeups, $10
// poll_wakeups. Once a row is done it keeps its final report: a periodic report cut off as the
// worker stopped may still reach the server after the final one (its statement was sent
// before its context ended), and must not undo it.
const sfReportSQL = `
	INSERT INTO sf_demo_workers (name, done, victim_pending, victim_epoch, gets, errors, stale, takeovers, notify_wakeups, poll_wakeups)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
	ON CONFLICT (name) DO UPDATE SET done = EXCLUDED.done, victim_pending = EXCLUDED.victim_pending,
		victim_epoch = EXCLUDED.victim_epoch, gets = EXCLUDED.gets, errors = EXCLUDED.errors, stale = EXCLUDED.stale,
		takeovers = EXCLUDED.takeovers, notify_wakeups = EXCLUDED.notify_wakeups, poll_wakeups = EXCLUDED.poll_wakeups
	WHERE NOT sf_demo_workers.done`

func (w *sfWorkerState) flush(ctx context.Context, done bool) error {
	st := w.cache.Stats()
	_, err := w.pool.Exec(ctx, sfReportSQL,
		w.name, done, w.victimPending.Load(), w.victimEpoch.Load(), w.gets.Load(), w.errors.Load(), w.stale.Load(),
		st.Takeovers, st.NotifyWakeups, st.PollWakeups)
	if err != nil && ctx.Err() == nil {
		w.logger.Warn("flush counters", "error", err)
	}
	return err
}

// sfDemoSource is the demo's slow source: each call is recorded (start and end, by the
// database clock, with the fetch epoch) before and after it takes fetchTime. In the worker
// given hangKey, a call of that key never returns.
type sfDemoSource struct {
	pool      *pgxpool.Pool
	worker    string
	fetchTime time.Duration
	hangKey   string
}

func (s *sfDemoSource) Fetch(ctx context.Context, req singleflight.Request) ([]byte, error) {
	rec := context.WithoutCancel(ctx) // the record is written whatever happens to the call
	var id int64
	if err := s.pool.QueryRow(rec, `INSERT INTO sf_demo_calls (worker, key, epoch) VALUES ($1, $2, $3) RETURNING id`,
		s.worker, req.Key, req.Epoch).Scan(&id); err != nil {
		return nil, fmt.Errorf("record call: %w", err)
	}
	if req.Key == s.hangKey {
		<-make(chan struct{}) // until this process is killed
	}
	outcome := "ok"
	var err error
	select {
	case <-time.After(s.fetchTime):
	case <-ctx.Done():
		outcome, err = "cancelled", ctx.Err()
	}
	if _, e := s.pool.Exec(rec, `UPDATE sf_demo_calls SET ended_at = clock_timestamp(), outcome = $2 WHERE id = $1`, id, outcome); e != nil {
		err = errors.Join(err, fmt.Errorf("record call end: %w", e))
	}
	if err != nil {
		return nil, err
	}
	return fmt.Appendf(nil, "%s@%d from %s pid %d", req.Key, req.Epoch, s.worker, os.Getpid()), nil
}
