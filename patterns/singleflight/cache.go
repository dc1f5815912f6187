package singleflight

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	dbq "github.com/batchclaim/batchclaim/internal/db"
	"github.com/batchclaim/batchclaim/pgdb"
)

// notifyChannel is the LISTEN/NOTIFY channel; the payload is the key.
const notifyChannel = "batchclaim_singleflight"

// ErrStopped is returned by Get once the cache's Run has returned.
var ErrStopped = errors.New("singleflight cache stopped")

// errLeaseLost marks a local fetch whose lease was taken over or ran out: its result, if any,
// was not stored, and the callers waiting on it read the key again.
var errLeaseLost = errors.New("fetch lease lost")

// Cache is one instance's view of the shared per-key cache. Many instances (processes) share
// one database; each key is fetched from the Source by at most one of them at a time.
type Cache struct {
	db     pgdb.DB // every statement goes through it; its Pool gives the LISTEN connection
	source Source
	cfg    Config // with defaults applied and checked
	q      *dbq.Queries
	stats  counters

	mu      sync.Mutex
	flights map[string]*flight                    // fetches this cache runs, by key
	waiters map[string]map[chan struct{}]struct{} // Gets waiting on a key, woken by NOTIFY
	runCtx  context.Context                       // Run's context while it runs; fetches live under it
	stopped bool
	fetches sync.WaitGroup
	notify  bool // a LISTEN connection is up
}

// flight is a fetch this cache runs; done is closed once entry or err is set.
type flight struct {
	key   string
	epoch int64
	done  chan struct{}
	entry Entry
	err   error
}

// New checks cfg and returns a Cache over db, whose statements run in db's schema (every
// instance sharing the cache uses the same one), that fetches missing keys from source. It
// does no I/O; call Run to have waiters woken by notifications (without Run they poll).
func New(db pgdb.DB, source Source, cfg Config) (*Cache, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if err := db.Err(); err != nil {
		return nil, fmt.Errorf("singleflight: %w", err)
	}
	if source == nil {
		return nil, errors.New("singleflight: a source is required")
	}
	return &Cache{
		db: db, source: source, cfg: cfg, q: dbq.New(),
		flights: map[string]*flight{}, waiters: map[string]map[chan struct{}]struct{}{},
	}, nil
}

// Holder is the name this cache writes into the lease rows it holds.
func (c *Cache) Holder() string { return c.cfg.Holder }

// Stats returns the cache's counters.
func (c *Cache) Stats() Stats { return c.stats.snapshot() }

// GetOption changes how one Get behaves.
type GetOption func(*getOptions)

type getOptions struct{ allowStale bool }

// AllowStale makes Get return a stale value at once, marked Entry.Stale, while one instance
// refreshes it, instead of waiting for the fresh one. A key with no value at all is still
// waited for.
func AllowStale() GetOption { return func(o *getOptions) { o.allowStale = true } }

// Get returns the key's value: from the shared store when it is fresh; otherwise this cache
// either wins the key's fetch lease and calls the source, or waits for the instance that
// holds it (woken by a notification, polling as a fallback) and takes the lease over if that
// instance stops renewing it. Get returns when ctx ends, with ctx's error; a fetch this cache
// started keeps running for the other callers. A source failure is returned as *SourceError.
func (c *Cache) Get(ctx context.Context, key string, opts ...GetOption) (Entry, error) {
	var o getOptions
	for _, opt := range opts {
		opt(&o)
	}
	if key == "" || len(key) > maxKeyLen {
		return Entry{}, fmt.Errorf("singleflight get: key must be 1 to %d bytes, got %d", maxKeyLen, len(key))
	}
	c.stats.gets.Add(1)
	wake := c.subscribe(key)
	defer c.unsubscribe(key, wake)
	var awaited int64 // the fetch epoch whose result this call waits for
	for {
		if err := c.checkRunning(ctx); err != nil {
			return Entry{}, err
		}
		if f := c.localFlight(key); f != nil && !o.allowStale { // a stale reader must not wait for it
			e, done, err := c.awaitLocal(ctx, f)
			if done {
				return e, err
			}
			awaited = max(awaited, f.epoch)
			continue
		}
		st, err := c.lookup(ctx, key)
		if err != nil {
			return Entry{}, err
		}
		if e, done, err := c.answer(ctx, st, awaited, o); done {
			return e, err
		}
		if !st.fetching {
			if _, err := c.tryFetch(ctx, key); err != nil {
				return Entry{}, err
			}
			continue // our own flight, or whoever beat us to the lease
		}
		awaited = max(awaited, st.fetchEpoch)
		if err := c.wait(ctx, wake, st.leaseLeft); err != nil {
			return Entry{}, err
		}
	}
}

// answer decides whether the key's state already answers this Get.
func (c *Cache) answer(ctx context.Context, st state, awaited int64, o getOptions) (Entry, bool, error) {
	switch {
	case !st.found:
		return Entry{}, false, nil
	case st.fresh:
		c.stats.hits.Add(1)
		return st.entry(false), true, nil
	case awaited > 0 && st.hasValue && st.valueEpoch >= awaited && st.valueEpoch > st.errorEpoch:
		return st.entry(true), true, nil // the fetch we waited for outlasted the TTL
	case awaited > 0 && st.errorEpoch >= awaited && st.errorEpoch > st.valueEpoch:
		return Entry{}, true, st.sourceError()
	case o.allowStale && st.hasValue:
		c.stats.staleServed.Add(1)
		if !st.fetching && !st.errorFresh {
			if _, err := c.tryFetch(ctx, st.key); err != nil {
				c.cfg.Logger.Warn("singleflight: start refresh", "key", st.key, "error", err)
			}
		}
		return st.entry(true), true, nil
	case st.errorFresh:
		return Entry{}, true, st.sourceError()
	}
	return Entry{}, false, nil
}

func (c *Cache) checkRunning(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return ErrStopped
	}
	return nil
}

func (c *Cache) localFlight(key string) *flight {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.flights[key]
}

// awaitLocal waits for a fetch this cache runs. done is false when the fetch lost its lease
// and the caller must read the key again.
func (c *Cache) awaitLocal(ctx context.Context, f *flight) (Entry, bool, error) {
	select {
	case <-ctx.Done():
		return Entry{}, true, ctx.Err()
	case <-f.done:
	}
	if errors.Is(f.err, errLeaseLost) || errors.Is(f.err, ErrStopped) {
		return Entry{}, false, nil
	}
	return f.entry, true, f.err
}

// wait blocks until a notification for the key, the lease's expiry as the database reported
// it (leaseLeft), the poll interval, or ctx, whichever comes first.
func (c *Cache) wait(ctx context.Context, wake <-chan struct{}, leaseLeft time.Duration) error {
	c.stats.waits.Add(1)
	d := c.cfg.PollInterval
	if until := leaseLeft + leaseSlack; until < d {
		d = max(until, time.Millisecond)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-wake:
		c.stats.notifyWakeups.Add(1)
	case <-t.C:
		c.stats.pollWakeups.Add(1)
	}
	return nil
}

// leaseSlack is added to a lease's remaining time before a waiter looks again, so that it
// finds the lease expired rather than a few microseconds short of it.
const leaseSlack = 20 * time.Millisecond
