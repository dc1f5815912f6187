package claims

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/batchclaim/batchclaim/internal/db"
	"github.com/batchclaim/batchclaim/pgdb"
)

// The lease loop renews the instance's lease every RenewInterval on a connection of its own,
// apart from everything else the instance does: a claim cycle retrying a statement, a
// fetch, a submission's writes or a full pool never delay a renewal, so a healthy instance
// on a healthy database never reaches its local deadline.
//
// Run starts it; it runs until Shutdown (not until Run's context ends), so that a stopping
// instance keeps its claims alive while its submissions drain. An engine driven by calls to
// Cycle alone (tests, tools) has no lease loop, and each Cycle renews the lease first.

// leaseLoop is the running lease loop.
type leaseLoop struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// startLease starts the lease loop unless it runs already.
func (e *Engine) startLease() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.loop != nil {
		return
	}
	ctx, cancel := context.WithCancel(e.base)
	l := &leaseLoop{cancel: cancel, done: make(chan struct{})}
	e.loop = l
	go func() {
		defer close(l.done)
		e.runLease(ctx)
	}()
}

// stopLease stops the lease loop and waits for it.
func (e *Engine) stopLease() {
	e.mu.Lock()
	l := e.loop
	e.loop = nil
	e.mu.Unlock()
	if l != nil {
		l.cancel()
		<-l.done
	}
}

func (e *Engine) leaseRunning() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.loop != nil
}

func (e *Engine) runLease(ctx context.Context) {
	var conn *pgx.Conn
	defer func() {
		if conn != nil {
			_ = conn.Close(context.WithoutCancel(ctx))
		}
	}()
	t := time.NewTicker(e.cfg.RenewInterval)
	defer t.Stop()
	stalled := false
	for {
		// The first renewal goes at once: the lease was last renewed by Register, whatever
		// the instance did between Register and Run.
		if why := e.progress(); why != nil {
			// No renewal either way. It is a stall only if the database answers the lease's
			// own connection: when it does not, nothing moves for want of the database, the
			// renewal would fail too, and that is an outage, counted as failed renewals.
			var err error
			conn, err = e.pingOn(ctx, conn)
			switch {
			case err != nil && ctx.Err() == nil:
				e.stats.renewErrors.Add(1)
				e.log.Warn("lease renewal failed: the database does not answer", "error", err, "work", why)
			case err == nil && !stalled:
				stalled = true
				e.stats.stalls.Add(1)
				e.log.Error("the instance's work does not move: lease renewal stopped, so that its claims pass to live peers", "error", why)
			}
		} else {
			if stalled {
				stalled = false
				e.log.Warn("the instance's work moves again: lease renewal goes on")
			}
			var err error
			conn, err = e.renewOn(ctx, conn)
			if err != nil && ctx.Err() == nil {
				e.stats.renewErrors.Add(1)
				e.log.Warn("lease renewal failed", "error", err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// progress is Config.Progress's answer (nil without one).
func (e *Engine) progress() error {
	if e.cfg.Progress == nil {
		return nil
	}
	return e.cfg.Progress()
}

// pingOn asks the database for an answer on the lease's connection conn (dialled first when
// nil) without renewing, bounded like a renewal. It returns the connection to use next time:
// nil after an error.
func (e *Engine) pingOn(ctx context.Context, conn *pgx.Conn) (*pgx.Conn, error) {
	return e.onLeaseConn(ctx, conn, func(ctx context.Context, q pgdb.Querier) error {
		_, err := q.Exec(ctx, "SELECT 1")
		return err
	})
}

// renewOn renews the lease once on conn (dialled first when nil). Each step may take up to
// the local deadline D: a renewal is useful however late it arrives before then (the new
// deadline counts from when it was sent), and a hung connection is abandoned by then. It
// returns the connection to use next time: nil after an error, so that the next renewal
// dials afresh.
func (e *Engine) renewOn(ctx context.Context, conn *pgx.Conn) (*pgx.Conn, error) {
	return e.onLeaseConn(ctx, conn, e.heartbeat)
}

// onLeaseConn runs fn on the lease's connection conn, dialled first (with the pool's settings)
// when nil; fn and the dial may each take up to the local deadline. It returns the connection
// to use next time: nil after an error, so that the next call dials afresh.
func (e *Engine) onLeaseConn(ctx context.Context, conn *pgx.Conn, fn func(context.Context, pgdb.Querier) error) (*pgx.Conn, error) {
	if conn == nil {
		dctx, cancel := context.WithTimeout(ctx, e.cfg.LocalDeadline)
		c, err := pgx.ConnectConfig(dctx, e.db.Pool().Config().ConnConfig.Copy())
		cancel()
		if err != nil {
			return nil, fmt.Errorf("connect for lease renewal: %w", err)
		}
		conn = c
	}
	rctx, cancel := context.WithTimeout(ctx, e.cfg.LocalDeadline)
	defer cancel()
	if err := fn(rctx, e.db.In(conn)); err != nil {
		_ = conn.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	return conn, nil
}

// heartbeat renews the instance's lease through q; if the row is gone (pruned after a long
// stall) or not ours any more, it registers again (Register refuses an id another live process
// holds).
func (e *Engine) heartbeat(ctx context.Context, q pgdb.Querier) error {
	q, release, err := e.checkLease(ctx, q) // guard.go
	if err != nil {
		return fmt.Errorf("renew lease: %w", err)
	}
	defer release()
	now, err := e.clock.Now(ctx, q)
	if err != nil {
		return fmt.Errorf("renew lease: %w", err)
	}
	sent := time.Now()
	row, err := e.q.InstanceHeartbeat(ctx, q, db.InstanceHeartbeatParams{
		ID: e.cfg.InstanceID, Nonce: e.nonce, Now: now,
		Expiry1Ms: e.cfg.Expiry1.Milliseconds(), Expiry2Ms: e.cfg.Expiry2.Milliseconds(),
	})
	if pgdb.NoRows(err) {
		e.log.Warn("instance row missing or not ours any more; registering again")
		return e.Register(ctx)
	}
	if err != nil {
		return fmt.Errorf("renew lease: %w", err)
	}
	e.renewed(sent)
	e.renewedAt(row.HeartbeatAt)
	return nil
}
