package pgdb_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/batchclaim/batchclaim/pgdb"
)

// MissingGrant names the grant for the object in Postgres's refusal, in the schema given.
func TestMissingGrant(t *testing.T) {
	t.Parallel()
	refused := func(msg string) error {
		return fmt.Errorf("resume: %w", &pgconn.PgError{Code: "42501", Message: msg})
	}
	for _, tt := range []struct {
		err    error
		schema string
		want   string
	}{
		{refused("permission denied for table service_halts"), "batchclaim", "DELETE ON batchclaim.service_halts"},
		{refused("permission denied for table batches"), "ha", "UPDATE ON ha.batches"},
		{refused("permission denied for table batch_transitions"), "batchclaim", "INSERT ON batchclaim.batch_transitions"},
		{refused("permission denied for table claim_events"), "batchclaim", "SELECT, INSERT, UPDATE, DELETE ON batchclaim.claim_events"},
		{refused("permission denied for sequence batches_pos_seq"), "batchclaim", "USAGE ON SEQUENCE batchclaim.batches_pos_seq"},
		{refused("permission denied for schema nope"), "nope", "USAGE ON SCHEMA nope"},
		{refused("must be owner of table batches"), "batchclaim", "the privileges the statement needs (must be owner of table batches)"},
		{&pgconn.PgError{Code: "42P01", Message: "relation does not exist"}, "batchclaim", ""},
		{errors.New("permission denied for table batches"), "batchclaim", ""},
	} {
		if got := pgdb.MissingGrant(tt.err, tt.schema); got != tt.want {
			t.Errorf("MissingGrant(%v, %s) = %q, want %q", tt.err, tt.schema, got, tt.want)
		}
		if got, want := pgdb.PermissionDenied(tt.err), tt.want != ""; got != want {
			t.Errorf("PermissionDenied(%v) = %v, want %v", tt.err, got, want)
		}
	}
}
