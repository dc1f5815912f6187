package history

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

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
