package node_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/dlt"
	"github.com/batchclaim/batchclaim/dlt/dltsim"
	"github.com/batchclaim/batchclaim/node"
	"github.com/batchclaim/batchclaim/submitter"
	"github.com/batchclaim/batchclaim/testkit/testutil"
)

// Several instances share the work; every batch is committed, in seq order per service_id,
// with no unexplained duplicate POST; both ledger flavours.
func TestPipelineCommitsEverythingInOrder(t *testing.T) {
	t.Parallel()
	for _, flavor := range []dlt.Flavor{dlt.FlavorSawtooth, dlt.FlavorScabbard} {
		t.Run(string(flavor), func(t *testing.T) {
			t.Parallel()
			e := setup(t, flavor, dltsim.Config{CommitLatency: 5 * time.Millisecond})
			e.enqueue(12, 5)
			for _, name := range []string{"a", "b", "c"} {
				e.start(name, nil)
			}
			e.waitFinished(60 * time.Second)
			rep := e.check()
			if rep.Committed != 60 {
				t.Fatalf("committed %d of 60", rep.Committed)
			}
		})
	}
}

// An instance that stops gracefully hands its service_ids over at once; nothing is lost.
func TestGracefulStopHandsOver(t *testing.T) {
	t.Parallel()
	e := setup(t, dlt.FlavorSawtooth, dltsim.Config{CommitLatency: 5 * time.Millisecond})
	e.enqueue(10, 4)
	_, stopA := e.start("a", nil)
	testutil.WaitFor(t, 20*time.Second, "some batch committed", func() bool { return len(e.sim.Committed()) > 0 })
	stopA()
	var left int
	if err := e.admin.QueryRow(t.Context(), `SELECT count(*) FROM batchclaim.service_id_claims WHERE claimant IS NOT NULL`).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Fatalf("%d claims still held after a graceful stop", left)
	}
	e.start("b", nil)
	e.waitFinished(60 * time.Second)
	e.check()
}

// INVALID is terminal: never posted again, and the service_id goes on with its next batch.
func TestInvalidIsTerminal(t *testing.T) {
	t.Parallel()
	e := setup(t, dlt.FlavorSawtooth, dltsim.Config{CommitLatency: 5 * time.Millisecond, InvalidRate: 0.3, Seed: 7})
	e.enqueue(6, 5)
	e.start("a", nil)
	e.waitFinished(60 * time.Second)
	rep := e.check()
	if rep.Invalid == 0 || rep.Committed == 0 {
		t.Fatalf("want both outcomes with a 30%% invalid rate, got committed=%d invalid=%d", rep.Committed, rep.Invalid)
	}
	rows, err := e.admin.Query(t.Context(), `SELECT batch_id FROM batchclaim.batches WHERE state = 'INVALID'`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		if n := e.effectivePosts(id); n != 1 {
			t.Errorf("INVALID batch %s was posted %d times, want once", id[:12], n)
		}
	}
}

// With halt-on-invalid, the first INVALID batch stops its service_id.
func TestHaltOnInvalid(t *testing.T) {
	t.Parallel()
	e := setup(t, dlt.FlavorSawtooth, dltsim.Config{CommitLatency: 5 * time.Millisecond, InvalidRate: 1})
	ids := e.enqueue(1, 3)["svc-000"]
	n, _ := e.start("a", func(c *node.Config) { c.HaltOnInvalid = true })
	testutil.WaitFor(t, 20*time.Second, "first batch INVALID", func() bool { return e.state(ids[0]) == "INVALID" })
	testutil.WaitFor(t, 20*time.Second, "service halted", func() bool {
		var n int
		_ = e.admin.QueryRow(t.Context(), `SELECT count(*) FROM batchclaim.service_halts WHERE service_id = 'svc-000'`).Scan(&n)
		return n == 1
	})
	// Let the queuer run five more cycles; the later batches must stay NEW.
	from := n.Engine().Stats().Cycles
	testutil.WaitFor(t, 20*time.Second, "five more cycles", func() bool { return n.Engine().Stats().Cycles >= from+5 })
	for _, id := range ids[1:] {
		if s := e.state(id); s != "NEW" || e.effectivePosts(id) != 0 {
			t.Fatalf("batch after the halt is %s with %d posts, want NEW and none", s, e.effectivePosts(id))
		}
	}
}

// A ledger restart forgets a pending batch: after the UNKNOWN answers it is resubmitted
// exactly once, before the next batch, and then committed.
func TestUnknownAfterLedgerRestartResubmitsOnce(t *testing.T) {
	t.Parallel()
	e := setup(t, dlt.FlavorSawtooth, dltsim.Config{CommitLatency: 5 * time.Millisecond})
	ids := e.enqueue(1, 2)["svc-000"]
	e.sim.SetPaused(true) // accepted batches stay PENDING
	e.start("a", nil)
	testutil.WaitFor(t, 20*time.Second, "first batch PENDING", func() bool { return e.state(ids[0]) == "PENDING" })
	e.sim.Restart()
	e.sim.SetPaused(false)
	e.waitFinished(30 * time.Second)
	if n := e.effectivePosts(ids[0]); n != 2 {
		t.Fatalf("the forgotten batch was posted %d times, want 2 (one resubmission)", n)
	}
	rep := e.check()
	if rep.DuplicatePosts != 1 {
		t.Fatalf("duplicate posts = %d, want 1", rep.DuplicatePosts)
	}
	committed := e.sim.Committed()
	if len(committed) != 2 || committed[0] != ids[0] {
		t.Fatalf("commit order %v, want the resubmitted batch first", committed)
	}
}

// Ledger back-pressure (scabbard's 429) delays batches without losing or reordering them.
// (A 503 from scabbard proves nothing about the batch: it is an unknown outcome, not
// back-pressure.)
func TestBackPressure(t *testing.T) {
	t.Parallel()
	e := setup(t, dlt.FlavorScabbard, dltsim.Config{CommitLatency: 20 * time.Millisecond, QueueHigh: 4, QueueLow: 2, RetryAfter: 0})
	e.sim.InjectStatus(http.StatusTooManyRequests, 10)
	e.enqueue(12, 3)
	e.start("a", nil)
	e.start("b", nil)
	e.waitFinished(60 * time.Second)
	e.check()
	var delayed int
	if err := e.admin.QueryRow(t.Context(), `SELECT count(*) FROM batchclaim.batch_history WHERE to_state = 'DELAYED'`).Scan(&delayed); err != nil {
		t.Fatal(err)
	}
	if delayed == 0 {
		t.Fatal("no batch was ever DELAYED under back-pressure")
	}
}

// With an adapter whose VALID fixes the order (SkipValid), the next batch goes out while the
// previous is VALID, before it is committed; order at the ledger still holds.
func TestSkipValidSendsNextBatchEarly(t *testing.T) {
	t.Parallel()
	e := setup(t, dlt.FlavorScabbard, dltsim.Config{CommitLatency: 600 * time.Millisecond})
	ids := e.enqueue(1, 3)["svc-000"]
	e.start("a", func(c *node.Config) { c.SkipValid = true })
	e.waitFinished(30 * time.Second)
	e.check()
	var early bool
	if err := e.admin.QueryRow(t.Context(), `
		SELECT (SELECT min(t.at) FROM batchclaim.batch_history t JOIN batchclaim.batches b USING (seq) WHERE b.batch_id = $2 AND t.to_state = 'INFLIGHT')
		     < (SELECT min(t.at) FROM batchclaim.batch_history t JOIN batchclaim.batches b USING (seq) WHERE b.batch_id = $1 AND t.to_state = 'COMMITTED')`,
		ids[0], ids[1]).Scan(&early); err != nil {
		t.Fatal(err)
	}
	if !early {
		t.Fatal("the second batch was not sent before the first was committed")
	}
}

// A submission whose answer is lost after the ledger took the batch (dropped response) is
// UNKNOWN; the ledger is asked before anything is resent, and since it has the batch,
// nothing is.
func TestDroppedResponseIsAskedNotResent(t *testing.T) {
	t.Parallel()
	e := setup(t, dlt.FlavorSawtooth, dltsim.Config{CommitLatency: 5 * time.Millisecond})
	ids := e.enqueue(1, 2)["svc-000"]
	e.sim.InjectDroppedResponses(1)
	e.start("a", nil)
	e.waitFinished(30 * time.Second)
	e.check()
	if n := e.effectivePosts(ids[0]); n != 1 {
		t.Fatalf("the batch whose answer was dropped reached the ledger %d times, want 1", n)
	}
	// The first attempt's outcome is unknown: recorded as such, or never recorded at all (NULL)
	// when a loaded machine made the instance miss its local deadline during the POST.
	var outcome *string
	if err := e.admin.QueryRow(t.Context(), `SELECT outcome FROM batchclaim.submission_attempts a JOIN batchclaim.batches b USING (seq) WHERE b.batch_id = $1 ORDER BY a.id LIMIT 1`, ids[0]).Scan(&outcome); err != nil {
		t.Fatal(err)
	}
	if outcome != nil && *outcome != "unknown" {
		t.Fatalf("first attempt outcome %q, want unknown", *outcome)
	}
}

// A graceful stop lets a submission that outlasts the local deadline finish (the lease keeps
// being renewed while it drains), records its outcome, and then releases the claim.
func TestGracefulStopDrainsLongSubmission(t *testing.T) {
	t.Parallel()
	e := setup(t, dlt.FlavorSawtooth, dltsim.Config{CommitLatency: 5 * time.Millisecond})
	ids := e.enqueue(1, 1)["svc-000"]
	started := make(chan struct{})
	slow := submitter.SubmitterFunc(func(ctx context.Context, b batchclaim.Batch) (batchclaim.Result, error) {
		close(started)
		select { // longer than the local deadline (2/3 s)
		case <-time.After(1500 * time.Millisecond):
			return batchclaim.Result{Verdict: batchclaim.Done}, nil
		case <-ctx.Done():
			return batchclaim.Result{}, ctx.Err()
		}
	})
	n, stop := e.start("a", func(c *node.Config) { c.Submitter, c.Statuses = slow, nil })
	<-started
	stop()
	if got := e.state(ids[0]); got != "COMMITTED" {
		t.Fatalf("after the graceful stop the batch is %s, want COMMITTED (the submission was cut short)", got)
	}
	if f := n.Engine().Stats().DeadlineFences; f != 0 {
		t.Fatalf("the instance fenced itself %d times while draining", f)
	}
	var held int
	if err := e.admin.QueryRow(t.Context(), `SELECT count(*) FROM batchclaim.service_id_claims WHERE claimant IS NOT NULL`).Scan(&held); err != nil {
		t.Fatal(err)
	}
	if held != 0 {
		t.Fatalf("%d claims still held after the stop", held)
	}
}
