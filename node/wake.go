package node

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batchclaim/batchclaim/claims"
	"github.com/batchclaim/batchclaim/internal/notify"
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

// waker listens for new work on a connection of its own (internal/notify's loop) and tells
// the queuer which service_ids have it, and the claim engine when a service_id nobody holds
// does. When the connection fails notify makes it again with backoff; every (re)connection
// asks the queuer to look at all held claims, so a notification missed while not listening
// delays work by the reconnection, never loses it.
type waker struct {
	conn    *pgx.ConnConfig
	channel string
	every   time.Duration // how long a connection may be silent before it is checked
	eng     *claims.Engine
	q       interface {
		Dirty(serviceIDs ...string)
		DirtyAll()
	}
	// cancels is told of a cancel of a job this instance runs (notified on its cancel
	// channel), and after every (re)connection, when one may have gone unheard (cancel.go).
	cancels func()
	log     *slog.Logger
}

// newWaker prepares a waker; it does no I/O.
func newWaker(pool *pgxpool.Pool, connString string, eng *claims.Engine, q interface {
	Dirty(...string)
	DirtyAll()
}, cancels func(), log *slog.Logger) (*waker, error) {
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
		eng: eng, q: q, cancels: cancels, log: log}, nil
}

// run listens until ctx ends.
func (w *waker) run(ctx context.Context) {
	// Run fails only for a Config without Dial, OnNotify or a channel: this one has them all.
	_ = notify.Run(ctx, notify.Config{
		Dial:     func(ctx context.Context) (*pgx.Conn, error) { return pgx.ConnectConfig(ctx, w.conn) },
		Channels: []string{w.channel, freeChannel, cancelChannel(w.eng.InstanceID())},
		Quiet:    w.every,
		OnListen: w.listening,
		OnNotify: w.notified,
		OnLost: func(err error, retryIn time.Duration) {
			w.log.Warn("listening for new work failed; polling until it is back", "error", err, "retry_in", retryIn)
		},
	})
}

// listening runs each time the connection listens: whatever was notified before now went
// unheard.
func (w *waker) listening() {
	w.log.Debug("listening for new work", "channel", w.channel)
	w.q.DirtyAll()
	w.eng.Kick()
	w.cancels()
}

// notified passes one notification on.
func (w *waker) notified(n *pgconn.Notification) {
	switch {
	case n.Channel == freeChannel:
		w.eng.Kick()
	case strings.HasPrefix(n.Channel, cancelChannelPrefix):
		w.cancels()
	default:
		w.q.Dirty(n.Payload)
	}
}
