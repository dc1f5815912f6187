package dbtest

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batchclaim/batchclaim/migrations"
	"github.com/batchclaim/batchclaim/pgdb"
)

const (
	// createAttempts bounds retries of CREATE DATABASE while the template is still in use.
	createAttempts = 10
	createBackoff  = 200 * time.Millisecond
)

var (
	// createMu serializes this binary's CREATE DATABASE ... TEMPLATE statements: Postgres
	// refuses a copy while another session uses the template, and a copy in progress is one.
	createMu sync.Mutex
	dbCount  atomic.Int64
)

// NewDB creates a fresh database copied from the migrated template and returns its URL. The
// database is dropped (WITH (FORCE), cutting leftover connections) when the test ends. It
// skips or fails the test when there is no server.
func NewDB(t testing.TB) string {
	t.Helper()
	ensure(t)
	name := fmt.Sprintf("bct_%s_%d", runID, dbCount.Add(1))
	if err := createFromTemplate(t.Context(), name); err != nil {
		t.Fatalf("dbtest: create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		defer cancel()
		if err := adminExec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			t.Errorf("dbtest: drop database %s: %v", name, err)
		}
	})
	u, err := databaseURL(source.URL, name)
	if err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	return u
}

// NewDBInSchema is NewDB with batchclaim's tables in schema instead of the default: the
// copy's batchclaim schema is dropped, so that nothing left there can answer for the code
// under test, and the migrations run into schema (migrations.InSchema).
func NewDBInSchema(t testing.TB, schema string) string {
	t.Helper()
	u := NewDB(t)
	conn, err := pgx.Connect(t.Context(), u)
	if err != nil {
		t.Fatalf("dbtest: connect: %v", err)
	}
	_, err = conn.Exec(t.Context(), "DROP SCHEMA "+pgx.Identifier{migrations.SchemaDefault}.Sanitize()+" CASCADE")
	_ = conn.Close(context.WithoutCancel(t.Context()))
	if err != nil {
		t.Fatalf("dbtest: drop schema %s: %v", migrations.SchemaDefault, err)
	}
	if err := migrations.Up(t.Context(), u, migrations.InSchema(schema)); err != nil {
		t.Fatalf("dbtest: migrate into schema %s: %v", schema, err)
	}
	return u
}

// NewDBBeforeLatest is NewDB one migration down: the schema a rolling upgrade's migration
// meets. It returns the latest version too.
func NewDBBeforeLatest(t testing.TB) (url string, latest uint) {
	t.Helper()
	u := NewDB(t)
	latest, err := migrations.Latest()
	if err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	if err := migrations.Down(t.Context(), u, 1); err != nil {
		t.Fatalf("dbtest: down one migration: %v", err)
	}
	return u, latest
}

// NewPool returns a pool on a fresh database from NewDB. The pool is closed when the test
// ends, before the database is dropped.
func NewPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	u := NewDB(t)
	pool, err := pgxpool.New(t.Context(), u)
	if err != nil {
		t.Fatalf("dbtest: open pool: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// createFromTemplate copies the template, retrying while another session still uses it
// (another binary's leftover backend, or one still exiting).
func createFromTemplate(ctx context.Context, name string) error {
	sql := fmt.Sprintf("CREATE DATABASE %s TEMPLATE %s", pgx.Identifier{name}.Sanitize(), pgx.Identifier{template}.Sanitize())
	for attempt := 1; ; attempt++ {
		createMu.Lock()
		err := adminExec(ctx, sql)
		createMu.Unlock()
		if err == nil || !isObjectInUse(err) || attempt == createAttempts {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(createBackoff):
		}
	}
}

// isObjectInUse matches "source database ... is being accessed by other users".
func isObjectInUse(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "55006"
}

// databaseURL replaces the database in a postgres:// URL.
func databaseURL(raw, name string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return "", errors.New("want a postgres:// URL")
	}
	u.Path = "/" + name
	u.RawPath = ""
	return u.String(), nil
}

// Open returns the pgdb.DB of pool in schema (empty: the default), failing the test if Open
// refuses them.
func Open(t testing.TB, pool *pgxpool.Pool, schema string) pgdb.DB {
	t.Helper()
	db, err := pgdb.Open(pool, schema)
	if err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	return db
}

// NewOpen is NewPool's pool opened in the default schema: what most tests give a constructor.
func NewOpen(t testing.TB) pgdb.DB {
	t.Helper()
	return Open(t, NewPool(t), "")
}

// Unreachable returns a DB on a pool that has not connected and cannot (nothing listens at
// its address): for constructors, which do no I/O, and for handlers that must not query. A
// query through it fails within a second.
func Unreachable(t testing.TB) pgdb.DB {
	t.Helper()
	pool, err := pgxpool.New(t.Context(), "postgres://nobody@127.0.0.1:1/none?connect_timeout=1")
	if err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	t.Cleanup(pool.Close)
	return Open(t, pool, "")
}

// HoldSnapshot opens a REPEATABLE READ transaction on b and takes its snapshot, as a long
// report would, and keeps it until the test ends: no row version that was live when it was
// taken, nor its index entries, can be removed by vacuum meanwhile.
func HoldSnapshot(t testing.TB, b pgdb.Beginner) {
	t.Helper()
	ctx := context.WithoutCancel(t.Context())
	tx, err := b.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	if err != nil {
		t.Fatalf("dbtest: hold a snapshot: %v", err)
	}
	t.Cleanup(func() { _ = tx.Rollback(ctx) })
	if _, err := tx.Exec(ctx, "SELECT 1"); err != nil {
		t.Fatalf("dbtest: hold a snapshot: %v", err)
	}
}
