package history

import (
	"context"
	"time"

	"github.com/batchclaim/batchclaim/pgdb"
	"github.com/cenkalti/backoff/v4"
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
		if err != nil && !pgdb.Retryable(err) {
			return backoff.Permanent(err)
		}
		return err
	}
	return backoff.Retry(op, backoff.WithContext(b, ctx))
}
