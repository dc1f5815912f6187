package node_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/claims"
	"github.com/batchclaim/batchclaim/dlt"
	"github.com/batchclaim/batchclaim/dlt/dltsim"
	"github.com/batchclaim/batchclaim/node"
	"github.com/batchclaim/batchclaim/submitter"
	"github.com/batchclaim/batchclaim/testkit/testutil"
)

// A graceful stop whose drain times out must not release the claim of a submission that is
// still running (a Submitter that ignores cancellation): another instance would adopt the
// batch and send it again while the old call may still reach the ledger. Claims whose
// submissions have ended are released at once; the busy one is left to expire.
func TestGracefulStopKeepsTheClaimOfARunningSubmission(t *testing.T) {
	t.Parallel()
	e := setup(t, dlt.FlavorSawtooth, dltsim.Config{})
	ids := e.enqueue(1, 1)["svc-000"]
	if err := claims.RegisterServiceIDs(t.Context(), e.admin, "idle-1", "idle-2"); err != nil {
		t.Fatal(err)
	}
	entered, unstick := make(chan struct{}), make(chan struct{})
	stuck := submitter.SubmitterFunc(func(ctx context.Context, b batchclaim.Batch) (batchclaim.Result, error) {
		close(entered)
		<-unstick // ignores ctx: a call that does not end when asked
		return batchclaim.Result{Verdict: batchclaim.Done}, nil
	})
	defer close(unstick)
	// S is short so that the drain times out quickly.
	n, stop := e.start("a", func(c *node.Config) {
		c.Submitter, c.Statuses = stuck, nil
		c.Claims.MaxSubmission = 500 * time.Millisecond
	})
	testutil.WaitFor(t, 20*time.Second, "all three claims held", func() bool { return len(n.Engine().Held()) == 3 })
	<-entered
	stop() // returns after the drain timed out and the stuck call was cancelled in vain

	owners := map[string]*uuid.UUID{}
	rows, err := e.admin.Query(t.Context(), `SELECT service_id, claimant FROM batchclaim.service_id_claims`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var s string
		var c *uuid.UUID
		if err := rows.Scan(&s, &c); err != nil {
			t.Fatal(err)
		}
		owners[s] = c
	}
	if c := owners["svc-000"]; c == nil || *c != n.Engine().InstanceID() {
		t.Fatalf("the claim of the still-running submission was released (claimant %v): another instance could resend %s", c, ids[0][:12])
	}
	for _, idle := range []string{"idle-1", "idle-2"} {
		if owners[idle] != nil {
			t.Fatalf("idle claim %s not released at stop", idle)
		}
	}
	if st := e.state(ids[0]); st != "INFLIGHT" {
		t.Fatalf("batch is %s, want INFLIGHT (its outcome was never recorded)", st)
	}
}
