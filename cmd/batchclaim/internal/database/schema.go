package database

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batchclaim/batchclaim/pgdb"
)

// NoTables is what every command says of a schema without batchclaim's tables.
func NoTables(schema string) error {
	return fmt.Errorf("schema %s has no batchclaim tables: run migrate up (batchclaim migrate up --schema %s, which also moves the tables of v0.1.0 or earlier out of public)", schema, schema)
}

// CheckSchema returns NoTables when schema does not hold batchclaim's tables. It reads the
// catalog only, which every role may, so that a role without a grant on the tables is told
// about the grant by the first statement that needs it, not that the tables are missing.
func CheckSchema(ctx context.Context, q pgdb.Querier, schema string) error {
	var found bool
	err := q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = $1 AND c.relname = 'batches')`, schema).Scan(&found)
	if err != nil {
		return fmt.Errorf("look for batchclaim's tables in schema %s: %w", schema, err)
	}
	if !found {
		return NoTables(schema)
	}
	return nil
}

// Explain turns the database errors an operator acts on into what to do, for a command
// working in schema: a table or schema that does not exist (SQLSTATE 42P01, 3F000) means
// the schema has no batchclaim tables (NoTables); a refused privilege (42501) names the grant
// the role lacks. Other errors, and nil, come back as they are.
func Explain(schema string, err error) error {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return err
	}
	switch {
	case pgdb.UndefinedTable(err):
		return fmt.Errorf("%w (%s)", NoTables(schema), pgErr.Message)
	case pgdb.PermissionDenied(err):
		return fmt.Errorf("the database role may not do this: it lacks GRANT %s (%s); connect as a role that has it (deploy/roles.sql), or grant it",
			pgdb.MissingGrant(err, schema), pgErr.Message)
	}
	return err
}

// OpenSchema is Open for a command that works on batchclaim's tables in schema: the name is
// checked first, and a schema without the tables is refused (NoTables) before the command
// does anything.
func OpenSchema(ctx context.Context, dbURL, schema string, maxConns int32, options ...func(*pgxpool.Config)) (*pgxpool.Pool, error) {
	if err := pgdb.ValidateSchema(schema); err != nil {
		return nil, fmt.Errorf("--schema: %w", err)
	}
	pool, err := Open(ctx, dbURL, maxConns, options...)
	if err != nil {
		return nil, err
	}
	if err := CheckSchema(ctx, pool, schema); err != nil {
		pool.Close()
		return nil, err
	}
	return pool, nil
}
