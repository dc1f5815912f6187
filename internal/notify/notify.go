package notify

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// QuietDefault is how long a connection may be silent before Run pings it, when
// Config.Quiet is zero.
const QuietDefault = 15 * time.Second

// Config says what Run listens to and whom it tells.
type Config struct {
	// Dial opens the listening connection, a connection of Run's own (Run closes it when it
	// fails or Run returns). Required. Dial may take a pool's connection out of the pool
	// (pgxpool.Conn.Hijack) or dial one apart from it (for a pool behind a pooler in
	// transaction mode, where LISTEN does not work). Run bounds the dial by Quiet (at least
	// 5 s).
	Dial func(ctx context.Context) (*pgx.Conn, error)
	// Channels to LISTEN on. At least one.
	Channels []string
	// Quiet is how long Run waits for a notification before it runs OnQuiet and pings the
	// connection, so that one that died silently is noticed. Zero means QuietDefault.
	Quiet time.Duration
	// OnListen runs each time the connection listens, the first time and after every
	// reconnection: what was notified before then went unheard. It may be nil.
	OnListen func()
	// OnNotify is told of each notification. Required. It must not block for long: the next
	// notification waits for it.
	OnNotify func(*pgconn.Notification)
	// OnQuiet runs when Quiet passed without a notification. It may be nil.
	OnQuiet func()
	// OnLost is told why the connection failed or could not be made, and when Run tries
	// again; meanwhile nothing is notified. It may be nil.
	OnLost func(err error, retryIn time.Duration)
}

// Run listens until ctx ends, making the connection again with backoff (100 ms doubling to
// 5 s, back to 100 ms once a connection listens) whenever it fails.
func Run(ctx context.Context, cfg Config) error {
	if cfg.Dial == nil || cfg.OnNotify == nil || len(cfg.Channels) == 0 {
		return errors.New("notify: Dial, OnNotify and a channel are required")
	}
	if cfg.Quiet <= 0 {
		cfg.Quiet = QuietDefault
	}
	b := backoff.NewExponentialBackOff()
	b.InitialInterval, b.MaxInterval, b.MaxElapsedTime = 100*time.Millisecond, 5*time.Second, 0
	b.Reset()
	for ctx.Err() == nil {
		listened, err := listen(ctx, cfg)
		if ctx.Err() != nil {
			break
		}
		if listened {
			b.Reset()
		}
		wait := b.NextBackOff()
		if cfg.OnLost != nil {
			cfg.OnLost(err, wait)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C:
		}
	}
	return nil
}

// listen dials, listens and hands notifications on until the connection fails or ctx ends.
// listened says whether it got as far as listening.
func listen(ctx context.Context, cfg Config) (listened bool, err error) {
	bound := max(cfg.Quiet, 5*time.Second)
	dctx, cancel := context.WithTimeout(ctx, bound)
	conn, err := cfg.Dial(dctx)
	cancel()
	if err != nil {
		return false, fmt.Errorf("connect: %w", err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	stmts := make([]string, len(cfg.Channels))
	for i, ch := range cfg.Channels {
		stmts[i] = "LISTEN " + pgx.Identifier{ch}.Sanitize()
	}
	lctx, cancel := context.WithTimeout(ctx, bound)
	_, err = conn.Exec(lctx, strings.Join(stmts, "; "))
	cancel()
	if err != nil {
		return false, fmt.Errorf("listen: %w", err)
	}
	if cfg.OnListen != nil {
		cfg.OnListen()
	}
	for {
		wctx, cancel := context.WithTimeout(ctx, cfg.Quiet)
		n, err := conn.WaitForNotification(wctx)
		quiet := wctx.Err() != nil
		cancel()
		switch {
		case ctx.Err() != nil:
			return true, ctx.Err()
		case err == nil:
			cfg.OnNotify(n)
			continue
		case !quiet && !errors.Is(err, context.DeadlineExceeded) && !pgconn.Timeout(err):
			return true, fmt.Errorf("wait for notifications: %w", err)
		}
		if cfg.OnQuiet != nil {
			cfg.OnQuiet()
		}
		pctx, cancel := context.WithTimeout(ctx, bound)
		err = conn.Ping(pctx)
		cancel()
		if err != nil {
			return true, fmt.Errorf("check the listening connection: %w", err)
		}
	}
}
