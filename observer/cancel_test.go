package observer_test

import (
	"strings"
	"testing"

	"github.com/batchclaim/batchclaim/ingest"
	"github.com/batchclaim/batchclaim/observer"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
)

// A cancel's reason is bounded (it is kept twice and shown on the page): a longer one, or
// one that is not UTF-8, is refused and the job is left as it was.
func TestCancelRefusesAReasonBeyondTheBound(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.NewPool(t)
	s, err := ingest.Enqueue(ctx, pool, "k", "job-1", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, reason := range []string{strings.Repeat("r", observer.MaxCancelReason+1), "bad \xff byte"} {
		if _, err := observer.Cancel(ctx, pool, s.Seq, reason); err == nil {
			t.Errorf("Cancel with a reason of %d bytes (valid UTF-8: %v): no error", len(reason), !strings.Contains(reason, "\xff"))
		}
	}
	var state string
	if err := pool.QueryRow(ctx, "SELECT state FROM batchclaim.batches WHERE seq = $1", s.Seq).Scan(&state); err != nil || state != "NEW" {
		t.Fatalf("the job after refused cancels: %s, %v; want NEW", state, err)
	}
	c, err := observer.Cancel(ctx, pool, s.Seq, strings.Repeat("r", observer.MaxCancelReason))
	if err != nil || c.To != "CANCELLED" {
		t.Fatalf("Cancel with a reason of the bound: %+v, %v", c, err)
	}
}
