package history

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

func TestTransient(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{io.ErrUnexpectedEOF, true},
		{fmt.Errorf("read: %w", &pgconn.PgError{Code: "57P01"}), true},
		{&pgconn.PgError{Code: "25006"}, true},
		{&pgconn.PgError{Code: "08006"}, true},
		{&pgconn.PgError{Code: "42P01"}, false}, // undefined_table: a defect, not an outage
		{context.Canceled, false},
	} {
		if got := Transient(tc.err); got != tc.want {
			t.Errorf("Transient(%v) = %t, want %t", tc.err, got, tc.want)
		}
	}
}

func TestRetry(t *testing.T) {
	t.Parallel()
	tries := 0
	err := Retry(t.Context(), time.Minute, func(context.Context) error {
		if tries++; tries < 3 {
			return io.ErrUnexpectedEOF
		}
		return nil
	})
	if err != nil || tries != 3 {
		t.Fatalf("Retry = %v after %d tries, want success on the third", err, tries)
	}
	tries = 0
	defect := &pgconn.PgError{Code: "42P01"}
	if err := Retry(t.Context(), time.Minute, func(context.Context) error { tries++; return defect }); !errors.Is(err, defect) || tries != 1 {
		t.Fatalf("Retry of a defect = %v after %d tries, want it at once", err, tries)
	}
}
