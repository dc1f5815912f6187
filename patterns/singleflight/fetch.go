package singleflight

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/batchclaim/batchclaim/internal/db"
	"github.com/batchclaim/batchclaim/internal/lease"
	"github.com/batchclaim/batchclaim/pgdb"
)

var (
	errFetchTimeout = errors.New("source call passed MaxFetchTime")
	errFetchDone    = errors.New("source call returned")
)

// state is a key's row as one lookup saw it, judged by the database clock.
type state struct {
	found                  bool
	key                    string
	fetchEpoch             int64
	hasValue               bool
	value                  []byte
	valueEpoch, errorEpoch int64
	fetchedAt, expiresAt   time.Time
	errMessage             string
	fresh, errorFresh      bool
	fetching               bool          // a holder's lease is live
	leaseLeft              time.Duration // until that lease expires, by the database clock
}

func (c *Cache) lookup(ctx context.Context, key string) (state, error) {
	r, err := c.q.SingleflightLookup(ctx, c.db, key)
	if pgdb.NoRows(err) {
		return state{key: key}, nil
	}
	if err != nil {
		return state{}, fmt.Errorf("singleflight: read key %q: %w", key, err)
	}
	st := state{
		found: true, key: key, fetchEpoch: r.FetchEpoch, value: r.Value,
		fresh: r.Fresh, errorFresh: r.ErrorFresh, fetching: r.Fetching,
		leaseLeft: time.Duration(r.LeaseLeftUs) * time.Microsecond,
	}
	if r.ValueEpoch != nil {
		st.hasValue, st.valueEpoch = true, *r.ValueEpoch
	}
	if r.FetchedAt != nil && r.ExpiresAt != nil {
		st.fetchedAt, st.expiresAt = *r.FetchedAt, *r.ExpiresAt
	}
	if r.ErrorEpoch != nil && r.Error != nil {
		st.errorEpoch, st.errMessage = *r.ErrorEpoch, *r.Error
	}
	return st, nil
}

func (s state) entry(stale bool) Entry {
	return Entry{Key: s.key, Value: s.value, Epoch: s.valueEpoch, FetchedAt: s.fetchedAt, ExpiresAt: s.expiresAt, Stale: stale}
}

func (s state) sourceError() error {
	return &SourceError{Key: s.key, Epoch: s.errorEpoch, Message: s.errMessage}
}

// tryFetch takes the key's fetch lease if nobody holds a live one and the key has no fresh
// value or negative result, and starts the fetch. It reports whether it did.
func (c *Cache) tryFetch(ctx context.Context, key string) (bool, error) {
	sent := time.Now()
	r, err := c.q.SingleflightAcquire(ctx, c.db, db.SingleflightAcquireParams{
		Key: key, Holder: c.cfg.Holder, LeaseUs: c.cfg.LeaseTTL.Microseconds(), TtlUs: c.cfg.TTL.Microseconds(),
	})
	if pgdb.NoRows(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("singleflight: take fetch lease of %q: %w", key, err)
	}
	c.stats.fetches.Add(1)
	log := c.cfg.Logger.With("key", key, "epoch", r.FetchEpoch)
	if r.TakenOverFrom != nil {
		c.stats.takeovers.Add(1)
		log.Info("singleflight: took over an expired fetch lease", "previous_holder", *r.TakenOverFrom)
	} else {
		log.Debug("singleflight: took fetch lease")
	}
	c.startFetch(ctx, &flight{key: key, epoch: r.FetchEpoch, done: make(chan struct{})}, sent)
	return true, nil
}

// startFetch runs the source for a lease this cache just took, apart from the caller: the
// fetch lives under Run's context (or, without Run, the caller's values without its
// cancellation), so that a caller giving up does not waste the fetch others wait for.
func (c *Cache) startFetch(ctx context.Context, f *flight, sent time.Time) {
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		c.release(ctx, f)
		return
	}
	base := c.runCtx
	if base == nil {
		base = context.WithoutCancel(ctx)
	}
	c.flights[f.key] = f
	c.fetches.Add(1)
	c.mu.Unlock()
	go c.fetch(base, f, sent)
}

// fetch calls the source while a second goroutine renews the lease, then stores the result
// (value or negative result) on condition that the lease is still this fetch's.
func (c *Cache) fetch(base context.Context, f *flight, sent time.Time) {
	defer c.fetches.Done()
	defer func() {
		c.mu.Lock()
		if c.flights[f.key] == f {
			delete(c.flights, f.key)
		}
		c.mu.Unlock()
		close(f.done)
		c.wakeKey(f.key) // local waiters that looked before this flight was registered
	}()
	ctx, cancel := context.WithCancelCause(base)
	defer cancel(nil)
	callCtx, cancelCall := context.WithTimeoutCause(ctx, c.cfg.MaxFetchTime, errFetchTimeout)
	defer cancelCall()
	renewed := make(chan struct{})
	go func() { // renewals stop with the call, or at MaxFetchTime if the source ignores ctx
		defer close(renewed)
		c.renew(callCtx, f, sent, cancel)
	}()

	value, err := c.callSource(callCtx, f)
	cause := context.Cause(callCtx)
	cancel(errFetchDone)
	<-renewed

	wctx, wcancel := context.WithTimeout(context.WithoutCancel(base), c.cfg.LeaseTTL)
	defer wcancel()
	switch {
	case err == nil:
		c.store(wctx, f, value)
	case errors.Is(cause, errLeaseLost):
		f.err = errLeaseLost // cancelled because the lease is gone: nothing may be stored
	case base.Err() != nil:
		c.release(wctx, f) // the cache is stopping: let a waiter take over at once
		f.err = ErrStopped
	default:
		if errors.Is(cause, errFetchTimeout) {
			err = fmt.Errorf("no result within MaxFetchTime %s: %w", c.cfg.MaxFetchTime, err)
		}
		c.storeError(wctx, f, err)
	}
}

// callSource calls the source, turning a panic into an error so that the lease is settled.
func (c *Cache) callSource(ctx context.Context, f *flight) (value []byte, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("source panicked: %v", p)
		}
	}()
	return c.source.Fetch(ctx, Request{Key: f.key, Epoch: f.epoch})
}

// renew extends the lease every RenewInterval until ctx ends, through internal/lease: each
// renewal bounded by RenewInterval, and a watchdog at the local deadline (measured from when
// the last successful renewal was sent). When the lease was taken over, or that deadline
// passes without a renewal, it cancels the fetch with errLeaseLost: at the deadline itself,
// even while a renewal hangs.
func (c *Cache) renew(ctx context.Context, f *flight, sent time.Time, cancel context.CancelCauseFunc) {
	log := c.cfg.Logger.With("key", f.key, "epoch", f.epoch)
	err := lease.Keep(ctx, lease.Loop{
		Every: c.cfg.RenewInterval, Step: c.cfg.RenewInterval, Window: c.cfg.localDeadline(), Sent: sent,
		OnExpire: func() { cancel(errLeaseLost) },
		OnError:  func(err error) { log.Warn("singleflight: renew fetch lease", "error", err) },
	}, func(rctx context.Context) (time.Time, bool, error) {
		s := time.Now()
		n, err := c.q.SingleflightRenew(rctx, c.db, db.SingleflightRenewParams{
			Key: f.key, Epoch: f.epoch, Holder: c.cfg.Holder, LeaseUs: c.cfg.LeaseTTL.Microseconds(),
		})
		if err == nil && n != 1 {
			return s, true, errLeaseLost
		}
		return s, false, err
	})
	switch {
	case errors.Is(err, lease.ErrExpired):
		c.stats.leaseLost.Add(1)
		log.Warn("singleflight: could not renew the fetch lease in time; cancelling the fetch")
	case err != nil:
		c.stats.leaseLost.Add(1)
		log.Warn("singleflight: fetch lease taken over; cancelling the fetch")
		cancel(errLeaseLost)
	}
}

// store writes the value if the fetch's epoch is still the key's current one.
func (c *Cache) store(ctx context.Context, f *flight, value []byte) {
	r, err := c.q.SingleflightStore(ctx, c.db, db.SingleflightStoreParams{
		Key: f.key, Epoch: f.epoch, Holder: c.cfg.Holder, Value: value,
	})
	switch {
	case pgdb.NoRows(err):
		c.stats.rejected.Add(1)
		c.cfg.Logger.Info("singleflight: result of a fetch whose lease was taken over dropped", "key", f.key, "epoch", f.epoch)
		f.err = errLeaseLost
	case err != nil:
		c.cfg.Logger.Warn("singleflight: store result", "key", f.key, "epoch", f.epoch, "error", err)
		f.err = errLeaseLost // unknown whether it was stored: the callers read the key again
	default:
		e := Entry{Key: f.key, Value: value, Epoch: f.epoch}
		if r.FetchedAt != nil && r.ExpiresAt != nil {
			e.FetchedAt, e.ExpiresAt = *r.FetchedAt, *r.ExpiresAt
			e.Stale = !e.ExpiresAt.After(e.FetchedAt) // the fetch outlasted the TTL
		}
		f.entry = e
	}
}

// storeError keeps the source's error as the key's negative result for ErrorTTL.
func (c *Cache) storeError(ctx context.Context, f *flight, srcErr error) {
	c.stats.fetchErrors.Add(1)
	_, err := c.q.SingleflightStoreError(ctx, c.db, db.SingleflightStoreErrorParams{
		Key: f.key, Epoch: f.epoch, Holder: c.cfg.Holder, Error: srcErr.Error(), ErrorTtlUs: c.cfg.ErrorTTL.Microseconds(),
	})
	switch {
	case pgdb.NoRows(err):
		c.stats.rejected.Add(1)
		f.err = errLeaseLost
	case err != nil:
		c.cfg.Logger.Warn("singleflight: store source error", "key", f.key, "epoch", f.epoch, "error", err)
		f.err = errLeaseLost
	default:
		f.err = &SourceError{Key: f.key, Epoch: f.epoch, Message: srcErr.Error(), err: srcErr}
	}
}

// release gives the lease up without a result, so that a waiter takes over at once.
func (c *Cache) release(ctx context.Context, f *flight) {
	if _, err := c.q.SingleflightRelease(ctx, c.db, db.SingleflightReleaseParams{Key: f.key, Epoch: f.epoch, Holder: c.cfg.Holder}); err != nil {
		c.cfg.Logger.Warn("singleflight: release fetch lease", "key", f.key, "epoch", f.epoch, "error", err)
	}
}

// Invalidate makes the key's value stale at once (readers that allow stale values still get
// it) and forgets a negative result, so that the next Get fetches. A fetch already running
// began before the invalidation: its value is stored already stale, so its waiters get it
// and the Get after them fetches again.
func (c *Cache) Invalidate(ctx context.Context, key string) error {
	if _, err := c.q.SingleflightInvalidate(ctx, c.db, key); err != nil {
		return fmt.Errorf("singleflight: invalidate %q: %w", key, err)
	}
	return nil
}
