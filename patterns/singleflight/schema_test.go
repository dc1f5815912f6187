package singleflight

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/batchclaim/batchclaim/pgdb"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
	"github.com/batchclaim/batchclaim/testkit/testutil"
)

// Caches in a schema other than batchclaim: the database has no batchclaim schema at all, so
// every lookup, lease, renewal and store must find the cache's table in the configured one.
func TestCacheInSchema(t *testing.T) {
	t.Parallel()
	url := dbtest.NewDBInSchema(t, "pat")
	src := newFakeSource(t, true)
	// A lease long enough that the fetch held behind the gate keeps it however slow the
	// machine is: the test is about the schema, not about a lease expiring.
	cfg := Config{LeaseTTL: 30 * time.Second}
	a, b := newCacheIn(t, openDB(t, url, "pat"), src, cfg, true), newCacheIn(t, openDB(t, url, "pat"), src, cfg, true)
	var chans []<-chan result
	for range 3 {
		chans = append(chans, getAsync(t.Context(), a, "k"), getAsync(t.Context(), b, "k"))
	}
	testutil.WaitFor(t, 10*time.Second, "one fetch and waiters in the other cache", func() bool {
		sa, sb := a.Stats(), b.Stats()
		return sa.Fetches+sb.Fetches == 1 && sa.Waits+sb.Waits > 0
	})
	close(src.gate)
	// Every racing Get draws an epoch from the one sequence before it learns whether it won
	// the lease (the insert's VALUES run before its conflict check), so the winner's is any of
	// them: the fetch's is read from the results, which must all agree on it.
	var epoch int64
	for _, ch := range chans {
		r := recv(t, ch)
		if r.err != nil {
			t.Fatal(r.err)
		}
		if epoch == 0 {
			epoch = r.e.Epoch
		}
		if r.e.Epoch != epoch || string(r.e.Value) != fmt.Sprintf("k@%d", epoch) || r.e.Stale {
			t.Fatalf("got %+v, want k@%d fresh", r.e, epoch)
		}
	}
	if n := src.calls.Load(); n != 1 || epoch == 0 {
		t.Fatalf("%d source calls (epoch %d) for 6 concurrent Gets, want 1", n, epoch)
	}
	// The value is kept, in the schema: a later Get is a hit.
	if e, err := b.Get(t.Context(), "k"); err != nil || e.Epoch != epoch || string(e.Value) != fmt.Sprintf("k@%d", epoch) {
		t.Fatalf("Get after the fetch: %+v %v", e, err)
	}
	if n := src.calls.Load(); n != 1 || a.Stats().Hits+b.Stats().Hits == 0 {
		t.Fatalf("a later Get: %d source calls, %d hits; want it served from the store", n, a.Stats().Hits+b.Stats().Hits)
	}
	var rows int
	if err := open(t, url).QueryRow(t.Context(), `SELECT count(*) FROM pat.singleflight_entries WHERE key = 'k' AND value_epoch = $1`, epoch).Scan(&rows); err != nil || rows != 1 {
		t.Fatalf("rows in pat.singleflight_entries: %d, %v; want 1", rows, err)
	}

	if _, err := New(pgdb.DB{}, src, Config{}); err == nil || !strings.Contains(err.Error(), "singleflight: no database") {
		t.Fatalf("New with the zero DB: %v, want it refused", err)
	}
}
