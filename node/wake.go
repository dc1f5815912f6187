package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batchclaim/batchclaim/claims"
)

// The channels the database notifies on (the trigger batchclaim_notify_work of the
// migrations): new work for a service_id an instance holds goes to that instance's own channel
// with the service_id as payload; work for a service_id nobody holds goes to freeChannel.
const (
	workChannelPrefix = "batchclaim_work_"
	freeChannel       = "batchclaim_free"
)

// workChannel is the channel new work of id's service_ids is notified on.
func workChannel(id uuid.UUID) string {
	return workChannelPrefix + strings.ReplaceAll(id.String(), "-", "")
}

// waker listens for new work on a connection of its own and tells the queuer which
// service_ids have it, and the claim engine when a service_id nobody holds does. When the
// connection fails it reconnects with backoff; every (re)connection asks the queuer to look
// at all held claims, so a notification missed while not listening delays work by the
// reconnection, never loses it.
type waker struct {
	conn    *pgx.ConnConfig
	channel string
	every   time.Duration // how often a silent connection is checked
	eng     *claims.Engine
	q       interface {
		Dirty(serviceIDs ...string)
		DirtyAll()
	}
	log *slog.Logger
	// cancels is told of a cancel of a job this instance runs (notified on its cancel
	// channel), and after every (re)connection, when one may have gone unheard (cancel.go).
	cancels func()
}

// newWaker prepares a waker; it does no I/O.
func newWaker(pool *pgxpool.Pool, connString string, eng *claims.Engine, q interface {
	Dirty(...string)
	DirtyAll()
}, log *slog.Logger) (*waker, error) {
	var cc *pgx.ConnConfig
	if connString == "" {
		cc = pool.Config().ConnConfig.Copy()
	} else {
		var err error
		if cc, err = pgx.ParseConfig(connString); err != nil {
			return nil, fmt.Errorf("node: the listening connection's URL: %w", err)
		}
		if cc.ConnectTimeout == 0 {
			cc.ConnectTimeout = pool.Config().ConnConfig.ConnectTimeout
		}
	}
	// A wait that times out only sets a deadline on the socket: no cancel request is sent to
	// the server for an idle connection, and the connection stays usable.
	cc.BuildContextWatcherHandler = func(c *pgconn.PgConn) ctxwatch.Handler {
		return &pgconn.DeadlineContextWatcherHandler{Conn: c.Conn()}
	}
	return &waker{conn: cc, channel: workChannel(eng.InstanceID()), every: eng.Timings().RenewInterval,
		eng: eng, q: q, log: log}, nil
}

// run listens until ctx ends.
func (w *waker) run(ctx context.Context) {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval, b.MaxInterval, b.MaxElapsedTime = 100*time.Millisecond, 5*time.Second, 0
	b.Reset()
	for ctx.Err() == nil {
		listening, err := w.listen(ctx)
		if ctx.Err() != nil {
			return
		}
		if listening {
			b.Reset()
		}
		wait := b.NextBackOff()
		w.log.Warn("listening for new work failed; polling until it is back", "error", err, "retry_in", wait)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// listen connects, listens and passes notifications on until the connection fails. listening
// says whether it got as far as listening.
func (w *waker) listen(ctx context.Context) (listening bool, err error) {
	dctx, cancel := context.WithTimeout(ctx, max(w.every, 5*time.Second))
	conn, err := pgx.ConnectConfig(dctx, w.conn)
	cancel()
	if err != nil {
		return false, fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx)) //nolint:errcheck // closing a failed connection
	lctx, cancel := context.WithTimeout(ctx, max(w.every, 5*time.Second))
	_, err = conn.Exec(lctx, "LISTEN "+pgx.Identifier{w.channel}.Sanitize()+"; LISTEN "+pgx.Identifier{freeChannel}.Sanitize()+
		"; LISTEN "+pgx.Identifier{cancelChannel(w.eng.InstanceID())}.Sanitize())
	cancel()
	if err != nil {
		return false, fmt.Errorf("listen: %w", err)
	}
	w.log.Debug("listening for new work", "channel", w.channel)
	// Whatever was notified before now went unheard.
	w.q.DirtyAll()
	w.eng.Kick()
	w.cancelled()
	for {
		wctx, cancel := context.WithTimeout(ctx, w.every)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		switch {
		case err == nil:
			switch {
			case n.Channel == freeChannel:
				w.eng.Kick()
			case strings.HasPrefix(n.Channel, cancelChannelPrefix):
				w.cancelled()
			default:
				w.q.Dirty(n.Payload)
			}
			continue
		case ctx.Err() != nil:
			return true, ctx.Err()
		case !errors.Is(err, context.DeadlineExceeded) && !pgconn.Timeout(err):
			return true, fmt.Errorf("wait for notifications: %w", err)
		}
		// Silent for a while: make sure the connection still answers.
		pctx, cancel := context.WithTimeout(ctx, w.every)
		err = conn.Ping(pctx)
		cancel()
		if err != nil {
			return true, fmt.Errorf("check the listening connection: %w", err)
		}
	}
}

func (w *waker) cancelled() {
	if w.cancels != nil {
		w.cancels()
	}
}
