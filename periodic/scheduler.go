package periodic

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/ingest"
	"github.com/batchclaim/batchclaim/internal/db"
	"github.com/batchclaim/batchclaim/pgdb"
)

// Scheduler stores the ticks of its periodic jobs, once across every instance running one
// with the same jobs (see the package documentation).
type Scheduler struct {
	db  pgdb.DB
	cfg Config
	q   *db.Queries
	log *slog.Logger

	// midTick, when set (tests), is called inside a tick's transaction after the tick was
	// taken and its job stored, before the commit.
	midTick func(name string, tick time.Time)
}

// queries are the scheduler's statements; they hold no state (New's db parameter hides the
// package's name).
var queries = db.New()

// New returns a Scheduler for cfg's jobs in db. It does no I/O.
func New(db pgdb.DB, cfg Config) (*Scheduler, error) {
	if err := db.Err(); err != nil {
		return nil, fmt.Errorf("periodic: %w", err)
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("periodic: %w", err)
	}
	return &Scheduler{db: db, cfg: cfg, q: queries, log: cfg.Logger}, nil
}

// Run registers the jobs and stores their ticks as they come until ctx ends. A failed look
// is logged and tried again after a while; Run returns only ctx's error. A tick being stored
// when ctx ends is finished first (within LockTimeout + IdleTimeout), so that a job stored is
// never one whose Enqueued call was skipped.
func (s *Scheduler) Run(ctx context.Context) error {
	if len(s.cfg.Jobs) == 0 {
		<-ctx.Done()
		return ctx.Err()
	}
	wait := time.Duration(0)
	registered := false
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		if !registered {
			if err := s.Register(ctx); err != nil {
				s.log.Warn("periodic jobs: could not register the schedules; trying again", "error", err, "retry_in", s.cfg.Interval)
				wait = min(s.cfg.Interval, 5*time.Second)
				continue
			}
			registered = true
		}
		next, err := s.RunOnce(ctx)
		if errors.Is(err, batchclaim.ErrNotFound) {
			registered = false // a row deleted (Delete) while this instance runs the job
		}
		if err != nil && ctx.Err() == nil {
			s.log.Warn("periodic jobs: a look at the schedules failed; looking again soon", "error", err)
			wait = min(s.cfg.Interval, time.Second)
			continue
		}
		wait = min(max(next, 10*time.Millisecond), s.cfg.Interval)
	}
}

// Register writes every job's row (its schedule and key as configured), creating the rows
// of new jobs: a new job's first tick is its schedule's first after it was registered.
func (s *Scheduler) Register(ctx context.Context) error {
	for _, j := range s.cfg.Jobs {
		next := j.Schedule.Next(time.Now())
		if err := s.q.PeriodicRegister(ctx, s.db, db.PeriodicRegisterParams{Name: j.Name, Schedule: j.Schedule.String(),
			ServiceID: j.serviceID(), NextTick: next}); err != nil {
			return fmt.Errorf("register periodic job %q: %w", j.Name, pgdb.NotFound(err))
		}
	}
	return nil
}

// RunOnce stores the tick due of every job whose tick has come (by the database clock) and
// no instance stored yet, and returns how long until the next tick of any job. It is Run's
// one step, for a test to call; the jobs must be registered first (Register).
func (s *Scheduler) RunOnce(ctx context.Context) (time.Duration, error) {
	var errs []error
	next := s.cfg.Interval
	for _, j := range s.cfg.Jobs {
		in, err := s.runJob(ctx, j)
		if err != nil {
			errs = append(errs, fmt.Errorf("periodic job %q: %w", j.Name, err))
			continue
		}
		next = min(next, in)
	}
	return next, errors.Join(errs...)
}

// runJob stores j's latest tick due, if no instance did, and returns how long until its
// next tick. Ticks missed before the latest (the instances were down) are not stored.
func (s *Scheduler) runJob(ctx context.Context, j Job) (time.Duration, error) {
	st, err := s.q.PeriodicState(ctx, s.db, j.Name)
	if err != nil {
		return 0, fmt.Errorf("read its state: %w", pgdb.NotFound(err))
	}
	after := st.RegisteredAt
	if st.LastTick != nil {
		after = *st.LastTick
	}
	tick, skipped, ok := latestTick(j.Schedule, after, st.Now)
	if !ok {
		return j.Schedule.Next(maxTime(after, st.Now)).Sub(st.Now), nil
	}
	if err := s.store(ctx, j, tick); err != nil {
		return 0, err
	}
	if skipped > 0 {
		s.log.Info("periodic job: ticks missed while no instance ran are not stored; the latest one is", "name", j.Name,
			"missed", skipped, "tick", tick)
	}
	return j.Schedule.Next(tick).Sub(st.Now), nil
}

// store takes tick for j and stores its job in one transaction: of all instances, the one
// whose update of the job's row advances its last tick stores the job; the others find the
// tick taken when the row lock lets them through and store nothing. If the transaction does
// not commit (the instance died, its connection broke), nothing of it stays and another
// instance takes the tick.
func (s *Scheduler) store(ctx context.Context, j Job, tick time.Time) error {
	payload := j.Payload
	if j.PayloadFunc != nil {
		var err error
		if payload, err = j.PayloadFunc(tick); err != nil {
			return fmt.Errorf("payload of tick %s: %w", tick.Format(time.RFC3339), err)
		}
	}
	var stored ingest.Stored
	taken := false
	// The tick is due: once begun, its transaction is finished even if ctx ends meanwhile
	// (Run stopped), bounded by the lock and idle timeouts. Cancelled mid-commit, the
	// transaction could commit on the server while this instance saw an error and skipped
	// Enqueued for a job it stored.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.LockTimeout+s.cfg.IdleTimeout)
	defer cancel()
	err := pgdb.InTx(ctx, s.db, pgx.TxOptions{}, func(tx pgx.Tx) error {
		if err := pgdb.GuardTx(ctx, tx, s.cfg.LockTimeout, s.cfg.IdleTimeout); err != nil {
			return err
		}
		_, err := s.q.PeriodicAdvance(ctx, tx, db.PeriodicAdvanceParams{Name: j.Name, Tick: tick, NextTick: j.Schedule.Next(tick)})
		if pgdb.NoRows(err) {
			return nil // another instance took it (or the row is gone)
		}
		if err != nil {
			return fmt.Errorf("take tick %s: %w", tick.Format(time.RFC3339), err)
		}
		if stored, err = ingest.Enqueue(ctx, tx, j.serviceID(), TickID(j.Name, tick), payload, j.Options...); err != nil {
			return fmt.Errorf("store tick %s: %w", tick.Format(time.RFC3339), err)
		}
		if err := s.q.PeriodicStored(ctx, tx, db.PeriodicStoredParams{Name: j.Name, Seq: stored.Seq}); err != nil {
			return err
		}
		if s.midTick != nil {
			s.midTick(j.Name, tick)
		}
		taken = true
		return nil
	})
	if err != nil || !taken {
		return err
	}
	s.log.Debug("periodic job: tick stored", "name", j.Name, "tick", tick, "seq", stored.Seq, "new", stored.New)
	if s.cfg.Enqueued != nil {
		s.cfg.Enqueued(j.Name, tick, stored)
	}
	return nil
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
