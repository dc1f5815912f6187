package claims_test

import (
	"math"
	"testing"

	"github.com/batchclaim/batchclaim/internal/db"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
)

// ClaimsAcquire reads the free rows from a random point of their hash order, wrapping
// around: a start past every row takes them from before it, a start before every row from
// after it, and a chunk larger than what is left after the start takes the rest from before
// it. Each chunk takes at most max rows, each once, and logs one acquired event per row.
func TestAcquireWrapsAroundItsStart(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewPool(t)
	registerServiceIDs(t, pool, 100)
	e, _ := newEngine(t, pool, 1, nil)
	taken := map[string]bool{}
	for _, tc := range []struct {
		name       string
		start      int64
		max, wantN int
	}{
		{"start past every row", math.MaxInt64, 30, 30},
		{"start before every row", math.MinInt64, 30, 30},
		{"more wanted than left after the start", 0, 50, 40},
		{"nothing left", 0, 10, 0},
	} {
		rows, err := db.New().ClaimsAcquire(t.Context(), pool, db.ClaimsAcquireParams{Max: int32(tc.max), Start: tc.start, Claimant: e.InstanceID()})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if len(rows) != tc.wantN {
			t.Errorf("%s: took %d, want %d", tc.name, len(rows), tc.wantN)
		}
		for _, r := range rows {
			if taken[r.ServiceID] {
				t.Errorf("%s: %s taken twice", tc.name, r.ServiceID)
			}
			taken[r.ServiceID] = true
		}
	}
	if got := countOwned(owners(t, pool), e); got != 100 || len(taken) != 100 {
		t.Fatalf("the database lists %d claims of the instance and the chunks returned %d, want 100", got, len(taken))
	}
	var events int
	if err := pool.QueryRow(t.Context(), `SELECT count(*) FROM batchclaim.claim_events WHERE event = 'acquired' AND instance_id = $1`, e.InstanceID()).Scan(&events); err != nil {
		t.Fatal(err)
	}
	if events != 100 {
		t.Fatalf("%d acquired events, want 100", events)
	}
}
