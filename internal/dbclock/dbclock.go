package dbclock

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/batchclaim/batchclaim/pgdb"
)

// Reading is the database's clock function a shift is added to.
type Reading int

const (
	// TxStart reads now(): the start of the current transaction, the same instant every
	// statement of that transaction compares with when no shift is set.
	TxStart Reading = iota
	// Statement reads clock_timestamp(): the moment the reading statement runs, for a
	// component that takes the time once and uses it in later statements or transactions.
	Statement
)

// Clock is the database time one component's statements judge by. The zero value reads
// now() unshifted. A Clock must not be copied after first use; it is safe for concurrent use.
type Clock struct {
	// Reading is the function a shift is added to; set it before first use.
	Reading Reading
	shift   atomic.Int64 // nanoseconds added to the database clock
}

// Shift makes every later Now return the database's time + d; zero undoes it.
func (c *Clock) Shift(d time.Duration) { c.shift.Store(int64(d)) }

// Now returns the time a statement should judge by: nil (the database's own clock, read by
// the statement itself) unless a shift is set, else the reading plus the shift, read through
// q (one round trip), to microseconds as Postgres keeps it. The error is q's, unwrapped: the
// caller says what it was reading the clock for.
func (c *Clock) Now(ctx context.Context, q pgdb.Querier) (*time.Time, error) {
	d := c.shift.Load()
	if d == 0 {
		return nil, nil
	}
	var t time.Time
	if err := q.QueryRow(ctx, c.query(), d/1000).Scan(&t); err != nil {
		return nil, err
	}
	return &t, nil
}

func (c *Clock) query() string {
	if c.Reading == Statement {
		return "SELECT clock_timestamp() + $1::bigint * interval '1 microsecond'"
	}
	return "SELECT now() + $1::bigint * interval '1 microsecond'"
}
