package singleflight

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/batchclaim/batchclaim/internal/notify"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// listenCheckEvery is how long the listener waits for a notification before it pings its
// connection, so that a connection that died silently is noticed and replaced.
const listenCheckEvery = 15 * time.Second

// Run keeps a dedicated connection LISTENing for stored results, waking the Gets that wait for
// them, and opens it again (with backoff) whenever it is lost; meanwhile waiters poll. It
// blocks until ctx ends, then stops the cache: fetches in progress are cancelled and their
// leases released so that another instance takes over at once, and later Gets return
// ErrStopped. A Cache is Run at most once.
//
// The connection is taken out of the pool and runs LISTEN only, which names no table. The
// channel is the database's, shared by caches of every schema: a notification of a key
// another schema's cache stored wakes this one's waiters of that key for one lookup.
func (c *Cache) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	c.mu.Lock()
	if c.runCtx != nil || c.stopped {
		c.mu.Unlock()
		cancel()
		return errors.New("singleflight: Run called twice")
	}
	c.runCtx = ctx
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.stopped = true
		c.notify = false
		c.mu.Unlock()
		cancel()
		c.fetches.Wait()
		c.broadcast()
	}()
	return notify.Run(ctx, notify.Config{
		Dial: func(ctx context.Context) (*pgx.Conn, error) {
			pc, err := c.db.Pool().Acquire(ctx)
			if err != nil {
				return nil, fmt.Errorf("acquire listen connection: %w", err)
			}
			return pc.Hijack(), nil // ours alone from now on; the pool opens another in its place
		},
		Channels: []string{notifyChannel},
		Quiet:    listenCheckEvery,
		OnListen: func() {
			c.setNotify(true)
			c.broadcast() // results stored while nobody listened: read again now
		},
		OnNotify: func(n *pgconn.Notification) { c.wakeKey(n.Payload) },
		OnLost: func(err error, wait time.Duration) {
			c.setNotify(false)
			c.stats.reconnects.Add(1)
			c.broadcast() // a notification may have been missed: every waiter reads its key again
			c.cfg.Logger.Warn("singleflight: LISTEN connection lost; waiters poll until it is back", "error", err, "retry_in", wait)
		},
	})
}

func (c *Cache) setNotify(on bool) {
	c.mu.Lock()
	c.notify = on
	c.mu.Unlock()
}

// Listening reports whether the LISTEN connection is up (waiters are woken by notifications
// rather than only by polling).
func (c *Cache) Listening() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.notify
}

// subscribe registers a Get waiting on key; the channel receives (without blocking the
// sender, at most one pending) whenever the key may have changed.
func (c *Cache) subscribe(key string) chan struct{} {
	ch := make(chan struct{}, 1)
	c.mu.Lock()
	defer c.mu.Unlock()
	set := c.waiters[key]
	if set == nil {
		set = map[chan struct{}]struct{}{}
		c.waiters[key] = set
	}
	set[ch] = struct{}{}
	return ch
}

func (c *Cache) unsubscribe(key string, ch chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.waiters[key], ch)
	if len(c.waiters[key]) == 0 {
		delete(c.waiters, key)
	}
}

func (c *Cache) wakeKey(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for ch := range c.waiters[key] {
		poke(ch)
	}
}

func (c *Cache) broadcast() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, set := range c.waiters {
		for ch := range set {
			poke(ch)
		}
	}
}

func poke(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}
