package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Readiness timings: the listener pings the database once per ReadinessInterval on a
// connection of its own (ReadinessConns), apart from any request, and /readyz answers 200
// while the last answered ping came back less than ReadinessWindow ago. A flood of probes
// therefore costs the database nothing; one slow answer (a server short of CPU for a second)
// does not take the instance out of its load balancer, while a database that stops answering
// does, within ReadinessWindow; and no other reader (ingest, the workers, the status page,
// metrics) can make the pings wait for a connection.
const (
	ReadinessInterval = time.Second
	ReadinessWindow   = 3 * time.Second
	// ReadinessConns is the size of the readiness pings' own pool.
	ReadinessConns = 1
)

// errNoAnswerYet: no readiness ping has been answered since the listener started.
var errNoAnswerYet = errors.New("no readiness ping answered yet")

// dbProber pings the database on a pool of its own and remembers the last answer.
type dbProber struct {
	pool             *pgxpool.Pool
	interval, window time.Duration
	log              *slog.Logger

	mu       sync.Mutex
	answered time.Time // when the last answered ping came back (monotonic); zero: never
	err      error     // the last ping's error; nil after an answer
}

// newDBProber dials its pool with the node pool's configuration pc (a copy, changed here).
// Its pings are the connection's health check: pgxpool's own ping before handing out a
// connection idle over a second would double their round trips, so it is kept only for a
// connection idle longer than the window. Close the pool when run has returned.
func newDBProber(ctx context.Context, pc *pgxpool.Config, log *slog.Logger) (*dbProber, error) {
	pc.MaxConns, pc.MinConns, pc.MinIdleConns = ReadinessConns, 0, 0
	pc.ShouldPing = func(_ context.Context, p pgxpool.ShouldPingParams) bool { return p.IdleDuration > ReadinessWindow }
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("readiness pool: %w", err)
	}
	return &dbProber{pool: pool, interval: ReadinessInterval, window: ReadinessWindow, log: log}, nil
}

// run pings at once, then every interval (a ping slower than that delays the next one),
// until ctx ends. Each ping is bounded by the window: one that has not come back by then
// has made the instance not ready anyway.
func (p *dbProber) run(ctx context.Context) {
	t := time.NewTicker(p.interval)
	defer t.Stop()
	for {
		pctx, cancel := context.WithTimeout(ctx, p.window)
		err := p.pool.Ping(pctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		p.record(err)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// record notes a ping's outcome and logs when the database stops and starts answering.
func (p *dbProber) record(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case err == nil && p.err != nil && !p.answered.IsZero():
		p.log.Info("readiness: the database answers again")
	case err != nil && p.err == nil && !p.answered.IsZero():
		p.log.Warn("readiness: database ping failed; /readyz answers 503 if none is answered for "+p.window.String(), "error", err)
	case err != nil:
		p.log.Debug("readiness: database ping failed", "error", err)
	}
	p.err = err
	if err == nil {
		p.answered = time.Now()
	}
}

// ready is nil while the last answered ping came back less than the window ago.
func (p *dbProber) ready() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch age := time.Since(p.answered); {
	case p.answered.IsZero():
		return errors.Join(errNoAnswerYet, p.err)
	case age >= p.window && p.err != nil:
		return fmt.Errorf("no readiness ping answered for %v: %w", age.Round(time.Millisecond), p.err)
	case age >= p.window:
		return fmt.Errorf("no readiness ping answered for %v: the last one has not come back", age.Round(time.Millisecond))
	}
	return nil
}
