package observer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/batchclaim/batchclaim/internal/db"
	"github.com/batchclaim/batchclaim/pgdb"
)

// Retention defaults.
const (
	// RetentionDefault is the age the run command gives finished batches before deleting them.
	RetentionDefault = 7 * 24 * time.Hour
	// RetentionIntervalDefault is the time between two runs of the job.
	RetentionIntervalDefault = 5 * time.Minute
	// RetentionChunkDefault is the most batches one DELETE statement removes.
	RetentionChunkDefault = 1000
	// RetentionMaxChunksDefault is the most chunks one run deletes.
	RetentionMaxChunksDefault = 100
)

// RetentionConfig configures a Retention job.
type RetentionConfig struct {
	// MaxAge: finished batches (COMMITTED, INVALID) whose finish time is older than this are
	// deleted with their attempts and transitions. Required: must be positive (a caller that
	// does not want retention creates no Retention).
	MaxAge time.Duration
	// Interval between two runs. Zero means 5m.
	Interval time.Duration
	// Chunk bounds the batches one statement (one short transaction) deletes. Zero means 1000.
	Chunk int
	// MaxChunks bounds the chunks of one run; the rest waits for the next. Zero means 100.
	MaxChunks int
	// InstanceID is recorded as the instance that ran the job (shown by `batchclaim status`).
	InstanceID uuid.UUID
	// OnRun, if set, hears about each run that got to work (after it ended).
	OnRun func(RetentionRun)
	// Logger; nil discards.
	Logger *slog.Logger
}

// withDefaults returns c with every zero field filled in (MaxAge has no default).
func (c RetentionConfig) withDefaults() RetentionConfig {
	c.Interval = cmp.Or(c.Interval, RetentionIntervalDefault)
	c.Chunk = cmp.Or(c.Chunk, RetentionChunkDefault)
	c.MaxChunks = cmp.Or(c.MaxChunks, RetentionMaxChunksDefault)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// validate checks c with its defaults filled in.
func (c RetentionConfig) validate() error {
	var errs []error
	if c.MaxAge <= 0 {
		errs = append(errs, fmt.Errorf("MaxAge must be positive, got %s", c.MaxAge))
	}
	if c.Interval < 0 {
		errs = append(errs, fmt.Errorf("Interval must not be negative, got %s", c.Interval))
	}
	if c.Chunk < 0 {
		errs = append(errs, fmt.Errorf("Chunk must not be negative, got %d", c.Chunk))
	}
	if c.MaxChunks < 0 {
		errs = append(errs, fmt.Errorf("MaxChunks must not be negative, got %d", c.MaxChunks))
	}
	if len(errs) > 0 {
		return fmt.Errorf("retention: %w", errors.Join(errs...))
	}
	return nil
}

// RetentionRun is what one run did.
type RetentionRun struct {
	// Busy: another instance held the retention lock, so this run left the work to it.
	Busy bool
	// Chunks is the number of DELETE statements run, Pruned the batches they deleted.
	Chunks int
	Pruned int64
	// At is the database time recorded for the run (zero when Busy at the first chunk).
	At time.Time
}

// Retention deletes finished batches older than an age, on one instance at a time.
//
// Each chunk is one short transaction: it takes a transaction-scoped advisory lock without
// waiting (pg_try_advisory_xact_lock), deletes at most Chunk of the oldest finished batches
// through a partial index over finished batches (their attempts and transitions go by ON
// DELETE CASCADE), records the run in retention_state and commits, which releases the lock.
// An instance that finds the lock taken stops its run: another is pruning. A
// transaction-scoped lock is enough because a chunk needs nothing from the chunk before
// (each one picks the oldest rows left), so mutual exclusion is needed only while a chunk
// runs; it ends with the transaction whatever happens, even when the instance dies or its
// connection returns to the pool, so it can never be left held. Even without the lock two
// instances could not delete a batch twice; it spares them contending for the same rows.
type Retention struct {
	cfg RetentionConfig
	db  pgdb.DB
	q   *db.Queries
	log *slog.Logger

	mu      sync.Mutex
	pruned  int64
	lastRun time.Time
}

// RetentionStats are a Retention's counters since it was made.
type RetentionStats struct {
	Pruned  int64     // batches this instance deleted
	LastRun time.Time // database time of this instance's last run that got to work; zero if none
}

// NewRetention returns a Retention job that deletes in db. It does no I/O.
func NewRetention(db pgdb.DB, cfg RetentionConfig) (*Retention, error) {
	if err := db.Err(); err != nil {
		return nil, fmt.Errorf("observer: %w", err)
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("observer: %w", err)
	}
	return &Retention{cfg: cfg, db: db, q: queries, log: cfg.Logger}, nil
}

// Run runs the job at once and then every Interval until ctx ends.
func (r *Retention) Run(ctx context.Context) error {
	t := time.NewTicker(r.cfg.Interval)
	defer t.Stop()
	for {
		if run, err := r.PruneOnce(ctx, nil); err != nil && ctx.Err() == nil {
			r.log.Warn("retention run failed", "pruned", run.Pruned, "error", err)
		} else if run.Pruned > 0 {
			r.log.Info("retention: deleted finished batches", "pruned", run.Pruned, "chunks", run.Chunks, "max_age", r.cfg.MaxAge)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// Stats returns the counters.
func (r *Retention) Stats() RetentionStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return RetentionStats{Pruned: r.pruned, LastRun: r.lastRun}
}

// PruneOnce runs the job once: chunks until one deletes less than Chunk batches, MaxChunks
// ran, or another instance holds the lock. now is the time ages are judged by: nil means the
// database's now() (tests pass a later time instead of waiting).
func (r *Retention) PruneOnce(ctx context.Context, now *time.Time) (RetentionRun, error) {
	var run RetentionRun
	for run.Chunks < r.cfg.MaxChunks {
		n, at, locked, err := r.chunk(ctx, now, run.Pruned)
		if err != nil {
			return run, fmt.Errorf("retention: %w", err)
		}
		if !locked {
			run.Busy = true
			break
		}
		run.Chunks++
		run.Pruned += n
		run.At = at
		r.mu.Lock()
		r.pruned += n
		r.lastRun = at
		r.mu.Unlock()
		if n < int64(r.cfg.Chunk) {
			break
		}
	}
	if run.Chunks > 0 && r.cfg.OnRun != nil {
		r.cfg.OnRun(run)
	}
	return run, nil
}

// chunk deletes one chunk under the lock and records it; locked is false when another
// instance holds the lock.
func (r *Retention) chunk(ctx context.Context, now *time.Time, before int64) (n int64, at time.Time, locked bool, err error) {
	err = pgdb.InTx(ctx, r.db, pgx.TxOptions{}, func(tx pgx.Tx) error {
		if locked, err = r.q.RetentionTryLock(ctx, tx); err != nil || !locked {
			return err
		}
		if n, err = r.q.RetentionPrune(ctx, tx, db.RetentionPruneParams{Now: now, MaxAgeMs: r.cfg.MaxAge.Milliseconds(), MaxRows: int32(r.cfg.Chunk)}); err != nil {
			return fmt.Errorf("delete finished batches: %w", err)
		}
		at, err = r.q.RetentionRecord(ctx, tx, db.RetentionRecordParams{
			InstanceID: r.cfg.InstanceID, MaxAgeMs: r.cfg.MaxAge.Milliseconds(), Now: now, RunPruned: before + n, ChunkPruned: n,
		})
		if err != nil {
			return fmt.Errorf("record run: %w", err)
		}
		return nil
	})
	if err != nil || !locked {
		return 0, time.Time{}, locked, err
	}
	return n, at, true, nil
}
