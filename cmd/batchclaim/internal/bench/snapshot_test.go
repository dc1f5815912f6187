package bench

import (
	"testing"

	"github.com/batchclaim/batchclaim/testkit/dbtest"
)

// The steady scenario's snapshot holder keeps one session with a backend_xmin (what stops
// vacuum) until released, and ends that session then.
func TestHoldSnapshot(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewPool(t)
	holders := func() (n int) {
		t.Helper()
		if err := pool.QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_xmin IS NOT NULL AND state = 'idle in transaction'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	release, err := holdSnapshot(t.Context(), pool)
	if err != nil {
		t.Fatal(err)
	}
	if n := holders(); n != 1 {
		t.Fatalf("%d sessions hold a snapshot, want 1", n)
	}
	release()
	if n := holders(); n != 0 {
		t.Fatalf("%d sessions hold a snapshot after release, want 0", n)
	}
}
