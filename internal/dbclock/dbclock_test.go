package dbclock_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/batchclaim/batchclaim/internal/dbclock"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

func TestUnshiftedIsNil(t *testing.T) {
	// Nil lets every statement read the database's clock itself, with no extra round trip.
	var c dbclock.Clock
	now, err := c.Now(context.Background(), nil) // no query is made, so no connection is needed
	if err != nil || now != nil {
		t.Fatalf("Now = %v, %v; want nil, nil", now, err)
	}
}

func TestShift(t *testing.T) {
	ctx := context.Background()
	pool := dbtest.NewPool(t)
	var c dbclock.Clock
	c.Shift(time.Hour)
	var before time.Time
	if err := pool.QueryRow(ctx, "SELECT clock_timestamp()").Scan(&before); err != nil {
		t.Fatal(err)
	}
	now, err := c.Now(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	if now == nil || now.Sub(before) < time.Hour || now.Sub(before) > time.Hour+time.Minute {
		t.Fatalf("shifted now %v, database clock before %v: want about an hour later", now, before)
	}
	c.Shift(0)
	if now, err := c.Now(ctx, pool); err != nil || now != nil {
		t.Fatalf("after Shift(0): Now = %v, %v; want nil, nil", now, err)
	}
}

// TestReadings: inside a transaction, TxStart counts from the transaction's start and
// Statement from the reading itself.
func TestReadings(t *testing.T) {
	ctx := context.Background()
	pool := dbtest.NewPool(t)
	tx, err := pool.BeginTx(ctx, pgx.TxOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	var start time.Time
	if err := tx.QueryRow(ctx, "SELECT now()").Scan(&start); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "SELECT pg_sleep(0.2)"); err != nil {
		t.Fatal(err)
	}
	txStart := dbclock.Clock{Reading: dbclock.TxStart}
	stmt := dbclock.Clock{Reading: dbclock.Statement}
	txStart.Shift(time.Minute)
	stmt.Shift(time.Minute)
	a, err := txStart.Now(ctx, tx)
	if err != nil {
		t.Fatal(err)
	}
	b, err := stmt.Now(ctx, tx)
	if err != nil {
		t.Fatal(err)
	}
	if got := a.Sub(start); got != time.Minute {
		t.Errorf("TxStart: %v after the transaction's now(), want exactly 1m", got)
	}
	if got := b.Sub(start); got < time.Minute+200*time.Millisecond {
		t.Errorf("Statement: %v after the transaction's now(), want at least 1m0.2s", got)
	}
}
