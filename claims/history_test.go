package claims_test

import (
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batchclaim/batchclaim/testkit/history"
)

// checkHistory fails the test unless claim_events shows one owner at a time per service_id,
// strictly increasing epochs, and ends where the claims table is.
func checkHistory(t testing.TB, pool *pgxpool.Pool) int {
	t.Helper()
	rep, err := history.CheckClaims(t.Context(), pool)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range rep.Problems {
		t.Error(p)
	}
	return rep.Acquisitions
}
