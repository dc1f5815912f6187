package dbclock_test

import (
	"context"
	"fmt"
	"time"

	"github.com/batchclaim/batchclaim/internal/dbclock"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
)

// A statement that judges an expiry takes the time as an optional parameter and falls back on
// the database's own clock: COALESCE($1::timestamptz, now()). A component passes its Clock's
// Now as that parameter. Unshifted, Now is nil and costs no round trip; shifted, the same
// statement sees a lease that has a minute left as expired, without anyone waiting for it.
func ExampleClock() {
	pool, drop := dbtest.ExamplePool()
	defer drop()
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `CREATE TABLE leases (name text PRIMARY KEY, expires_at timestamptz NOT NULL);
		INSERT INTO leases VALUES ('report', now() + interval '1 minute')`); err != nil {
		panic(err)
	}
	var clock dbclock.Clock // one per component; its ShiftDBTime method would call Shift
	expired := func() bool {
		now, err := clock.Now(ctx, pool)
		if err != nil {
			panic(err)
		}
		var ok bool
		if err := pool.QueryRow(ctx, `SELECT expires_at <= COALESCE($1::timestamptz, now()) FROM leases WHERE name = 'report'`,
			now).Scan(&ok); err != nil {
			panic(err)
		}
		return ok
	}

	now, _ := clock.Now(ctx, pool)
	fmt.Println("unshifted: now parameter is nil:", now == nil, "expired:", expired())
	clock.Shift(2 * time.Minute)
	fmt.Println("shifted by 2m: expired:", expired())
	clock.Shift(0)
	fmt.Println("shift undone: expired:", expired())
	// Output:
	// unshifted: now parameter is nil: true expired: false
	// shifted by 2m: expired: true
	// shift undone: expired: false
}

// Inside a transaction, a TxStart clock reads now(), the transaction's start, as every
// statement of that transaction does; a Statement clock reads clock_timestamp(), the moment
// it is read, for a component that takes the time once and uses it in later statements.
func ExampleReading() {
	pool, drop := dbtest.ExamplePool()
	defer drop()
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	if err != nil {
		panic(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	var start time.Time
	if _, err := tx.Exec(ctx, `SELECT pg_sleep(0.01)`); err != nil { // the transaction ages
		panic(err)
	}
	if err := tx.QueryRow(ctx, `SELECT now()`).Scan(&start); err != nil {
		panic(err)
	}

	txStart := dbclock.Clock{Reading: dbclock.TxStart}
	statement := dbclock.Clock{Reading: dbclock.Statement}
	txStart.Shift(time.Hour)
	statement.Shift(time.Hour)
	a, err := txStart.Now(ctx, tx)
	if err != nil {
		panic(err)
	}
	b, err := statement.Now(ctx, tx)
	if err != nil {
		panic(err)
	}
	fmt.Println("TxStart: transaction start + 1h exactly:", a.Sub(start) == time.Hour)
	fmt.Println("Statement: later than that:", b.Sub(start) >= time.Hour+10*time.Millisecond)
	// Output:
	// TxStart: transaction start + 1h exactly: true
	// Statement: later than that: true
}
