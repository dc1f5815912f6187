package claims

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/batchclaim/batchclaim/internal/pg"
	"github.com/cenkalti/backoff/v4"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// isSerializationFailure reports SQLSTATE 40001 (serialization_failure), 40P01
// (deadlock_detected) or 55P03 (lock_not_available: lock_timeout passed while another
// transaction held a row): the transaction lost a race and may simply be run again.
func isSerializationFailure(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "40001" || pgErr.Code == "40P01" || pgErr.Code == "55P03")
}

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
func serializable(ctx context.Context, pool Pool, maxTries int, guard func(context.Context, Querier) error, retried func(), fn func(pgx.Tx) error) error {
	return retryTx(ctx, pool, pgx.TxOptions{IsoLevel: pgx.Serializable}, maxTries, guard, retried, fn)
}

// retry runs fn again while it fails with a transient conflict (isSerializationFailure), up
// to maxTries retries with jittered backoff; ctx ends the retries. retried is called once per
// retry.
func retry(ctx context.Context, maxTries int, retried func(), fn func() error) error {
	op := func() error {
		err := fn()
		if err == nil {
			return nil
		}
		if isSerializationFailure(err) {
			retried()
			return err
		}
		return backoff.Permanent(err)
	}
	if err := backoff.Retry(op, newBackOff(ctx, maxTries)); err != nil {
		if isSerializationFailure(err) {
			return fmt.Errorf("gave up after %d retries of a transient conflict: %w", maxTries, err)
		}
		return err
	}
	return nil
}

// retryTx runs fn in a transaction with opts, again while it fails with a transient
// conflict (isSerializationFailure), up to maxTries retries with jittered backoff; ctx ends
// the retries.
func retryTx(ctx context.Context, pool Pool, opts pgx.TxOptions, maxTries int, guard func(context.Context, Querier) error, retried func(), fn func(pgx.Tx) error) error {
	return retry(ctx, maxTries, retried, func() error { return runTx(ctx, pool, opts, guard, fn) })
}

func runTx(ctx context.Context, pool Pool, opts pgx.TxOptions, guard func(context.Context, Querier) error, fn func(pgx.Tx) error) error {
	return pg.InTx(ctx, pool, opts, func(tx pgx.Tx) error {
		if err := guard(ctx, tx); err != nil {
			return err
		}
		return fn(tx)
	})
}
