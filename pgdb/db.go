package pgdb

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DB is the database a part of the library works in: a connection pool and the schema that
// holds batchclaim's tables (the one migrations.Up was given). Every constructor of the
// library takes one, made once by Open and passed by value; a DB is itself a Beginner whose
// statements, and those of the transactions it starts, run in its schema. The zero DB is not
// usable: constructors refuse it (Err).
type DB struct {
	pool *pgxpool.Pool
	name string
	b    Beginner // pool moved into schema
}

// Open returns the DB of pool and schema. An empty schema means SchemaDefault; any other is
// checked by ValidateSchema. Open does no I/O: the pool stays the caller's to close.
func Open(pool *pgxpool.Pool, schema string) (DB, error) {
	if pool == nil {
		return DB{}, errors.New("pgdb: Open needs a pool")
	}
	schema = cmp.Or(schema, SchemaDefault)
	if err := ValidateSchema(schema); err != nil {
		return DB{}, fmt.Errorf("pgdb: %w", err)
	}
	return DB{pool: pool, name: schema, b: InSchema(pool, schema)}, nil
}

// Err is nil for a DB made by Open, and says how to make one otherwise.
func (d DB) Err() error {
	if d.pool == nil {
		return errors.New("no database: make one with pgdb.Open(pool, schema)")
	}
	return nil
}

// Pool is the pool itself, for what only a pool does: a connection of one's own (Acquire, for
// LISTEN or a lease), its settings (Config) and statistics (Stat). Statements run on it name
// the default schema; run them through the DB or In instead.
func (d DB) Pool() *pgxpool.Pool { return d.pool }

// Schema is the schema of batchclaim's tables: never empty for a DB made by Open.
func (d DB) Schema() string { return d.name }

// WithPool is the DB of another pool in the same schema, such as a pool made with this one's
// settings for a part that must not share its connections.
func (d DB) WithPool(pool *pgxpool.Pool) DB {
	d.pool, d.b = pool, InSchema(pool, d.name)
	return d
}

// In returns q (the caller's transaction or connection) with its statements moved into the
// DB's schema, for the functions that work inside a transaction the caller owns.
func (d DB) In(q Querier) Querier { return QuerierInSchema(q, d.name) }

// Exec runs sql on the pool in the DB's schema.
func (d DB) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return d.b.Exec(ctx, sql, args...)
}

// Query runs sql on the pool in the DB's schema.
func (d DB) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return d.b.Query(ctx, sql, args...)
}

// QueryRow runs sql on the pool in the DB's schema.
func (d DB) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return d.b.QueryRow(ctx, sql, args...)
}

// BeginTx starts a transaction on the pool whose statements run in the DB's schema.
func (d DB) BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error) {
	return d.b.BeginTx(ctx, opts)
}

// schema and unwrap let SchemaOf and Unwrap see through a DB as through what InSchema returns.
func (d DB) schema() string  { return d.name }
func (d DB) unwrap() Querier { return d.pool }
