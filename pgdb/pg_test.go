package pgdb_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/pgdb"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// InTx commits what fn wrote when fn succeeds and rolls it back when fn fails, returning
// fn's error.
func TestInTx(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewPool(t)
	ctx := t.Context()
	if _, err := pool.Exec(ctx, "CREATE TABLE pg_intx (v int)"); err != nil {
		t.Fatal(err)
	}
	if err := pgdb.InTx(ctx, pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "INSERT INTO pg_intx VALUES (1)")
		return err
	}); err != nil {
		t.Fatalf("committing InTx: %v", err)
	}
	boom := errors.New("boom")
	if err := pgdb.InTx(ctx, pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "INSERT INTO pg_intx VALUES (2)"); err != nil {
			return err
		}
		return boom
	}); !errors.Is(err, boom) {
		t.Fatalf("failing InTx = %v, want %v", err, boom)
	}
	var sum int
	if err := pool.QueryRow(ctx, "SELECT coalesce(sum(v), 0) FROM pg_intx").Scan(&sum); err != nil || sum != 1 {
		t.Fatalf("rows after commit and rollback: sum %d, %v; want 1", sum, err)
	}
}

// onePool is a pool of one connection to url, closed when the test ends: each use of it
// meets the same connection while that connection lives.
func onePool(t *testing.T, url string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// A transaction whose context ends inside fn is rolled back on a connection that stays open
// and goes back to the pool usable.
func TestInTxRollbackAfterCancel(t *testing.T) {
	t.Parallel()
	pool := onePool(t, dbtest.NewDB(t))
	ctx, cancel := context.WithCancel(t.Context())
	var pid uint32
	err := pgdb.InTx(ctx, pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
		pid = tx.Conn().PgConn().PID()
		cancel()
		return ctx.Err()
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("InTx = %v, want context.Canceled", err)
	}
	conn, err := pool.Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if got := conn.Conn().PgConn().PID(); got != pid {
		t.Fatalf("connection after the rollback: pid %d, want the same connection %d kept open", got, pid)
	}
	if st := conn.Conn().PgConn().TxStatus(); st != 'I' {
		t.Fatalf("connection after the rollback: transaction status %c, want idle", st)
	}
}

// A rollback on a link that froze after fn's last statement (nothing moves, no reset) is
// given up after RollbackTimeout: InTx returns fn's error, and the connection is closed
// rather than handed out again.
func TestInTxRollbackOnFrozenLink(t *testing.T) {
	t.Parallel()
	proxy, viaProxy := dbtest.Proxied(t, dbtest.NewDB(t))
	pool := onePool(t, viaProxy)
	var pid uint32
	done := make(chan error, 1)
	go func() {
		done <- pgdb.InTx(t.Context(), pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
			pid = tx.Conn().PgConn().PID()
			_, err := tx.Exec(t.Context(), "SELECT 1/0") // the server refuses; the link is fine
			proxy.Freeze()
			return err
		})
	}()
	var err error
	select {
	case err = <-done:
	case <-time.After(10 * pgdb.RollbackTimeout): // not a timing check: InTx must return at all
		proxy.Restore()
		t.Fatalf("InTx still waits for its rollback %s after the link froze", 10*pgdb.RollbackTimeout)
	}
	proxy.Restore()
	if code := pgdb.Code(err); code != "22012" {
		t.Fatalf("InTx = %v, want fn's division_by_zero", err)
	}
	conn, err := pool.Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if got := conn.Conn().PgConn().PID(); got == pid {
		t.Fatalf("the connection whose rollback was given up (pid %d) was handed out again", pid)
	}
}

// NotFound turns pgx.ErrNoRows into batchclaim.ErrNotFound, keeping both findable, and
// leaves other errors and nil alone.
func TestNotFound(t *testing.T) {
	t.Parallel()
	err := pgdb.NotFound(pgx.ErrNoRows)
	if !errors.Is(err, batchclaim.ErrNotFound) || !errors.Is(err, pgx.ErrNoRows) {
		t.Fatalf("NotFound(ErrNoRows) = %v, want it to wrap ErrNotFound and ErrNoRows", err)
	}
	other := errors.New("other")
	if got := pgdb.NotFound(other); got != other {
		t.Fatalf("NotFound(other) = %v, want it unchanged", got)
	}
	if got := pgdb.NotFound(nil); got != nil {
		t.Fatalf("NotFound(nil) = %v, want nil", got)
	}
	if !pgdb.NoRows(fmt.Errorf("read: %w", pgx.ErrNoRows)) || !pgdb.NoRows(err) || pgdb.NoRows(other) || pgdb.NoRows(nil) {
		t.Fatal("NoRows must find pgx.ErrNoRows, wrapped or not, and nothing else")
	}
}
