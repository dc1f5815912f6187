package claims

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/batchclaim/batchclaim/pgdb"
	"github.com/cenkalti/backoff/v4"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// isUniqueViolation reports SQLSTATE 23505.
func isUniqueViolation(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23505"
}

// newBackOff builds the jittered exponential backoff used between serialization retries.
func newBackOff(ctx context.Context, maxTries int) backoff.BackOff {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = 5 * time.Millisecond
	b.MaxInterval = 250 * time.Millisecond
	b.RandomizationFactor = 0.5
	b.MaxElapsedTime = 0 // bounded by tries
	return backoff.WithContext(backoff.WithMaxRetries(b, uint64(maxTries)), ctx)
}

// serializable runs fn in a SERIALIZABLE transaction, again and again while it fails with a
// serialization failure, up to maxTries retries. retried is called once per retry.
func serializable(ctx context.Context, pool pgdb.Beginner, maxTries int, guard func(context.Context, pgdb.Querier) error, retried func(), fn func(pgx.Tx) error) error {
	return retryTx(ctx, pool, pgx.TxOptions{IsoLevel: pgx.Serializable}, maxTries, guard, retried, fn)
}

// retry runs fn again while it fails with a transient conflict (pgdb.Conflict), up
// to maxTries retries with jittered backoff; ctx ends the retries. retried is called once per
// retry.
func retry(ctx context.Context, maxTries int, retried func(), fn func() error) error {
	op := func() error {
		err := fn()
		if err == nil {
			return nil
		}
		if pgdb.Conflict(err) {
			retried()
			return err
		}
		return backoff.Permanent(err)
	}
	if err := backoff.Retry(op, newBackOff(ctx, maxTries)); err != nil {
		if pgdb.Conflict(err) {
			return fmt.Errorf("gave up after %d retries of a transient conflict: %w", maxTries, err)
		}
		return err
	}
	return nil
}

// retryTx runs fn in a transaction with opts, again while it fails with a transient
// conflict (pgdb.Conflict), up to maxTries retries with jittered backoff; ctx ends
// the retries.
func retryTx(ctx context.Context, pool pgdb.Beginner, opts pgx.TxOptions, maxTries int, guard func(context.Context, pgdb.Querier) error, retried func(), fn func(pgx.Tx) error) error {
	return retry(ctx, maxTries, retried, func() error { return runTx(ctx, pool, opts, guard, fn) })
}

func runTx(ctx context.Context, pool pgdb.Beginner, opts pgx.TxOptions, guard func(context.Context, pgdb.Querier) error, fn func(pgx.Tx) error) error {
	return pgdb.InTx(ctx, pool, opts, func(tx pgx.Tx) error {
		if err := guard(ctx, tx); err != nil {
			return err
		}
		return fn(tx)
	})
}
