package pgdb

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Code is the SQLSTATE of err when it is, or wraps, a server error (*pgconn.PgError); ""
// for anything else, nil included.
func Code(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

// Conflict reports a transaction that lost to a concurrent one and is worth running again as
// it is: SQLSTATE 40001 (serialization_failure), 40P01 (deadlock_detected) or 55P03
// (lock_not_available: lock_timeout passed while another transaction held the row).
func Conflict(err error) bool {
	switch Code(err) {
	case "40001", "40P01", "55P03":
		return true
	}
	return false
}

// LockTimeout reports SQLSTATE 55P03 (lock_not_available): lock_timeout passed.
func LockTimeout(err error) bool { return Code(err) == "55P03" }

// UndefinedTable reports SQLSTATE 42P01 (undefined_table) or 3F000 (invalid_schema_name):
// the statement named a table or schema the database does not have, as before `migrate up`.
func UndefinedTable(err error) bool {
	switch Code(err) {
	case "42P01", "3F000":
		return true
	}
	return false
}

// Retryable reports an error after which the same work may succeed on another try: a
// Conflict, the server shutting down or starting (57P01, 57P02, 57P03), a session demoted to
// read-only under a failover (25006), a connection exception (class 08), or an error that
// is not the server's at all (a dropped socket, a refused dial). A cancelled context is not.
func Retryable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	code := Code(err)
	switch {
	case code == "":
		return true
	case Conflict(err):
		return true
	}
	switch code {
	case "57P01", "57P02", "57P03", "25006":
		return true
	}
	return code[:2] == "08"
}

// GuardTx bounds, for the rest of the transaction on q, how long a statement waits for a lock
// (lock_timeout) and how long the server keeps the transaction open while the client is
// silent (idle_in_transaction_session_timeout). The second matters when a process is paused
// or cut off in the middle of a transaction: the server ends that transaction and frees its
// locks (a fence among them), so that no other process waits behind a stalled one for long.
// Call it first in every transaction that writes rows others wait on.
func GuardTx(ctx context.Context, q Querier, lockTimeout, idleTimeout time.Duration) error {
	_, err := q.Exec(ctx, "SELECT set_config('lock_timeout', $1, true), set_config('idle_in_transaction_session_timeout', $2, true)",
		strconv.FormatInt(lockTimeout.Milliseconds(), 10), strconv.FormatInt(idleTimeout.Milliseconds(), 10))
	if err != nil {
		return fmt.Errorf("set transaction timeouts: %w", err)
	}
	return nil
}

// BoundedTx runs fn in a READ COMMITTED transaction on b that lasts at most d, for a write
// an operator asks for (a retry, a cancel, a resume). fn's context ends at d; at that point
// the driver closes the connection and asks the server to cancel over a new one, which a cut
// network does not carry, so the server bounds the transaction too (GuardTx): a lock wait
// ends at d/2, leaving the rest for the round trips, and a transaction the client went silent
// in ends at d. A write that timed out holds no row for long; TimedOut tells its error.
func BoundedTx(ctx context.Context, b Beginner, d time.Duration, fn func(context.Context, pgx.Tx) error) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	return InTx(ctx, b, pgx.TxOptions{}, func(tx pgx.Tx) error {
		if err := GuardTx(ctx, tx, d/2, d); err != nil {
			return err
		}
		return fn(ctx, tx)
	})
}

// TimedOut reports whether err is the end of a bound: a lock wait past lock_timeout, or a
// context deadline. After a deadline the commit may have been on its way, so the caller
// should look before trying again.
func TimedOut(err error) bool { return LockTimeout(err) || errors.Is(err, context.DeadlineExceeded) }
