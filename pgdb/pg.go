package pgdb

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/batchclaim/batchclaim"
)

// Querier runs statements: a *pgxpool.Pool, a *pgx.Conn or a pgx.Tx. It is the generated
// queries' db.DBTX.
type Querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Beginner is a Querier that can also start transactions: a *pgxpool.Pool or a *pgx.Conn.
type Beginner interface {
	Querier
	BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error)
}

// RollbackTimeout bounds the rollback InTx runs after a failure. A healthy server answers a
// ROLLBACK in milliseconds; a link that froze after fn's last statement (no reset, nothing
// moves) would otherwise hold the caller for as long as the kernel keeps the connection, up
// to a quarter of an hour. Past the bound the connection is closed instead of going back to
// the pool, and the server ends the transaction when it notices.
const RollbackTimeout = 2 * time.Second

// InTx runs fn in a transaction with opts started on b and commits it when fn returns nil;
// otherwise, or when the commit fails, the transaction is rolled back and the error returned.
// The rollback runs even when ctx has ended, so that the connection goes back to the pool
// clean instead of being closed, and is bounded by RollbackTimeout.
func InTx(ctx context.Context, b Beginner, opts pgx.TxOptions, fn func(pgx.Tx) error) error {
	return pgx.BeginTxFunc(ctx, cleanRollback{b}, opts, fn)
}

// cleanRollback starts transactions whose rollback ignores the end of its context.
type cleanRollback struct{ Beginner }

func (b cleanRollback) BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error) {
	tx, err := b.Beginner.BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	return rollbackTx{tx}, nil
}

type rollbackTx struct{ pgx.Tx }

func (t rollbackTx) Rollback(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), RollbackTimeout)
	defer cancel()
	return t.Tx.Rollback(ctx)
}

// NoRows reports whether err is, or wraps, pgx.ErrNoRows: a statement that should return a
// row returned none. The library tests for the driver's sentinel here alone.
func NoRows(err error) bool { return errors.Is(err, pgx.ErrNoRows) }

// NotFound returns err with pgx.ErrNoRows turned into batchclaim.ErrNotFound (both stay in
// the chain, so errors.Is finds either); any other error, and nil, unchanged.
func NotFound(err error) error {
	if NoRows(err) {
		return fmt.Errorf("%w: %w", batchclaim.ErrNotFound, err)
	}
	return err
}
