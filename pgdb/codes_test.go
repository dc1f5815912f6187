package pgdb_test

import (
	"context"
	"fmt"
	"io"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/batchclaim/batchclaim/pgdb"
)

func TestCodes(t *testing.T) {
	t.Parallel()
	code := func(c string) error { return fmt.Errorf("wrapped: %w", &pgconn.PgError{Code: c}) }
	for _, tc := range []struct {
		err                                         error
		conflict, lockTimeout, undefined, retryable bool
	}{
		{err: nil},
		{err: context.Canceled},
		{err: io.ErrUnexpectedEOF, retryable: true}, // a dropped socket
		{err: code("40001"), conflict: true, retryable: true},
		{err: code("40P01"), conflict: true, retryable: true},
		{err: code("55P03"), conflict: true, lockTimeout: true, retryable: true},
		{err: code("57P01"), retryable: true},
		{err: code("25006"), retryable: true},
		{err: code("08006"), retryable: true},
		{err: code("42P01"), undefined: true}, // a defect, not an outage
		{err: code("3F000"), undefined: true},
		{err: code("23505")},
	} {
		if got := pgdb.Conflict(tc.err); got != tc.conflict {
			t.Errorf("Conflict(%v) = %t", tc.err, got)
		}
		if got := pgdb.LockTimeout(tc.err); got != tc.lockTimeout {
			t.Errorf("LockTimeout(%v) = %t", tc.err, got)
		}
		if got := pgdb.UndefinedTable(tc.err); got != tc.undefined {
			t.Errorf("UndefinedTable(%v) = %t", tc.err, got)
		}
		if got := pgdb.Retryable(tc.err); got != tc.retryable {
			t.Errorf("Retryable(%v) = %t", tc.err, got)
		}
	}
}
