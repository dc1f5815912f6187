package pgdb

import (
	"context"
	"errors"
	"fmt"

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

// InTx runs fn in a transaction with opts started on b and commits it when fn returns nil;
// otherwise, or when the commit fails, the transaction is rolled back and the error returned.
// The rollback runs even when ctx has ended, so that the connection goes back to the pool
// clean instead of being closed.
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
	return t.Tx.Rollback(context.WithoutCancel(ctx))
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
