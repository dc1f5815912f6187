package history

import (
	"context"
	"errors"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/jackc/pgx/v5/pgconn"
)

// Retry runs fn until it succeeds, fails with an error that another try cannot cure, or
// limit has passed, with capped exponential backoff; each try gets its own context. It is how
// the harness (the chaos checker, the demo's live table and summary) rides through a
// failover: while the old primary is gone and the new one not yet promoted, reads fail with
// connection errors, and a pool still holds connections to a server that is gone.
func Retry(ctx context.Context, limit time.Duration, fn func(context.Context) error) error {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = 100 * time.Millisecond
	b.MaxInterval = 2 * time.Second
	b.MaxElapsedTime = limit
	op := func() error {
		err := fn(ctx)
		if err != nil && !Transient(err) {
			return backoff.Permanent(err)
		}
		return err
	}
	return backoff.Retry(op, backoff.WithContext(b, ctx))
}

// Transient reports whether err may go away once the database is back: any error that is
// not a Postgres error (the connection failed, broke or timed out), or a Postgres error of a
// server that is going away, starting, or no longer a primary.
func Transient(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return true
	}
	switch pgErr.Code {
	case "57P01", "57P02", "57P03", // admin_shutdown, crash_shutdown, cannot_connect_now
		"25006", // read_only_sql_transaction: the server was demoted under the session
		"40001", "40P01", "55P03":
		return true
	}
	return pgErr.Code[:2] == "08" // connection exception
}
