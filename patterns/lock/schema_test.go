package lock_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batchclaim/batchclaim/patterns/lock"
	"github.com/batchclaim/batchclaim/pgdb"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
)

// A Locker in a schema other than batchclaim: the database has no batchclaim schema at all,
// so every statement, Fence's in the caller's own transaction among them, must find the
// lock's tables in the configured one.
func TestLockInSchema(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool, err := pgxpool.New(ctx, dbtest.NewDBInSchema(t, "pat"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if _, err := pool.Exec(ctx, `CREATE TABLE public.guarded (epoch bigint NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	l, err := lock.New(dbtest.Open(t, pool, "pat"), lock.Config{TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	lease, err := l.Acquire(ctx, "job")
	if err != nil || lease.Epoch != 1 {
		t.Fatalf("acquire: %+v %v", lease, err)
	}
	if _, err := l.Acquire(ctx, "job"); !errors.Is(err, lock.ErrHeld) {
		t.Fatalf("second acquire: %v, want ErrHeld", err)
	}
	// The application's transaction, unwrapped: Fence puts its own statement in the schema.
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if err := l.Fence(ctx, tx, lease); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO public.guarded VALUES ($1)`, lease.Epoch)
		return err
	})
	if err != nil {
		t.Fatalf("fenced write: %v", err)
	}
	if err := l.Release(ctx, lease); err != nil {
		t.Fatalf("release: %v", err)
	}
	if h, err := l.History(ctx, "job"); err != nil || len(h) != 1 || h[0].ReleasedAt == nil {
		t.Fatalf("history: %+v %v", h, err)
	}
	var rows int
	if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM pat.owner_locks) + (SELECT count(*) FROM public.guarded)`).Scan(&rows); err != nil || rows != 2 {
		t.Fatalf("rows in pat.owner_locks and public.guarded: %d, %v; want 2", rows, err)
	}

	if _, err := lock.New(pgdb.DB{}, lock.Config{}); err == nil || !strings.Contains(err.Error(), "lock: no database") {
		t.Fatalf("the zero DB: %v, want it refused", err)
	}
}
