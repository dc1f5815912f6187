package observer_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/claims"
	"github.com/batchclaim/batchclaim/ingest"
	"github.com/batchclaim/batchclaim/observer"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
)

// One set write carries rows of several claims; a row whose claim was taken over is refused
// for that row alone (its claim dropped, the batch untouched) while the others are written.
// Outcomes finished concurrently are all recorded, each with its own fence.
func TestSetWritesFencePerRow(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.NewPool(t)
	const n = 20
	stored := map[string]ingest.Stored{}
	for i := range n {
		svc := fmt.Sprintf("svc-%02d", i)
		s, err := ingest.Enqueue(ctx, pool, svc, "b1", []byte(svc))
		if err != nil {
			t.Fatal(err)
		}
		stored[svc] = s
	}
	eng, err := claims.New(dbtest.Open(t, pool, ""), claims.Config{Name: "rec"})
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Register(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := eng.Cycle(ctx); err != nil {
		t.Fatal(err)
	}
	held := eng.Held()
	if len(held) != n {
		t.Fatalf("holds %d claims, want %d", len(held), n)
	}
	// svc-00's claim is taken over behind the engine's back (a new epoch).
	if _, err := pool.Exec(ctx, `UPDATE batchclaim.service_id_claims SET epoch = nextval('batchclaim.service_id_claim_epochs') WHERE service_id = 'svc-00'`); err != nil {
		t.Fatal(err)
	}
	var jobs []batchclaim.Job
	for _, c := range held {
		s := stored[c.ServiceID]
		jobs = append(jobs, batchclaim.Job{Claim: c, Batch: batchclaim.Batch{Seq: s.Seq, ServiceID: c.ServiceID, BatchID: "b1"},
			FromState: batchclaim.StateNew, Reason: "first"})
	}
	rec := mustRecorder(t, pool, eng, observer.RecorderConfig{})
	marked, err := rec.Mark(ctx, jobs)
	if err != nil {
		t.Fatal(err)
	}
	if len(marked) != n-1 {
		t.Fatalf("marked %d, want %d (all but the stale svc-00)", len(marked), n-1)
	}
	for _, j := range marked {
		if j.Claim.ServiceID == "svc-00" || string(j.Batch.Payload) != j.Claim.ServiceID || j.Batch.Attempts != 0 {
			t.Fatalf("marked %s with payload %q and %d attempts before", j.Claim.ServiceID, j.Batch.Payload, j.Batch.Attempts)
		}
	}
	// The marks write no attempt row; the history shows them from the batch rows.
	var rows, marks int
	if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM batchclaim.submission_attempts),
		(SELECT count(*) FROM batchclaim.batch_history WHERE from_state = 'NEW' AND to_state = 'INFLIGHT' AND detail = 'first')`).Scan(&rows, &marks); err != nil {
		t.Fatal(err)
	}
	if rows != 0 || marks != n-1 {
		t.Fatalf("after the marks: %d attempt rows and %d marks in the history, want 0 and %d", rows, marks, n-1)
	}
	if _, ok := eng.Holds("svc-00"); ok {
		t.Fatal("the stale claim was not dropped")
	}
	if st := state(t, pool, stored["svc-00"].Seq); st != "NEW" {
		t.Fatalf("stale row's batch is %s, want it untouched (NEW)", st)
	}

	// Now svc-01 is taken over while its POST runs; every outcome is finished at once.
	if _, err := pool.Exec(ctx, `UPDATE batchclaim.service_id_claims SET epoch = nextval('batchclaim.service_id_claim_epochs') WHERE service_id = 'svc-01'`); err != nil {
		t.Fatal(err)
	}
	errs := make([]error, len(marked))
	var wg sync.WaitGroup
	for i, j := range marked {
		wg.Go(func() {
			_, _, errs[i] = rec.Finish(ctx, batchclaim.Outcome{Job: j, Result: batchclaim.Result{Verdict: batchclaim.Done}, Latency: time.Millisecond})
		})
	}
	wg.Wait()
	for i, j := range marked {
		want := j.Claim.ServiceID == "svc-01"
		if got := errors.Is(errs[i], batchclaim.ErrClaimLost); got != want {
			t.Errorf("%s: Finish returned %v", j.Claim.ServiceID, errs[i])
		}
		wantState := "COMMITTED"
		if want {
			wantState = "INFLIGHT"
		}
		if st := state(t, pool, j.Batch.Seq); st != wantState {
			t.Errorf("%s: batch %s, want %s", j.Claim.ServiceID, st, wantState)
		}
	}
	// An outcome that commits its batch writes no attempt row: the batch row keeps the attempt,
	// and the history shows its mark and its outcome from there.
	var commits, whole, marksLeft int
	if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM batchclaim.submission_attempts),
		(SELECT count(*) FROM batchclaim.batch_history WHERE from_state = 'INFLIGHT' AND to_state = 'COMMITTED' AND detail = 'done'),
		(SELECT count(*) FROM batchclaim.batches b
		 WHERE b.state = 'COMMITTED' AND b.finished_at >= b.submitted_at AND b.attempt_reason = 'first'
		   AND b.attempt_from = 'NEW' AND b.attempt_latency_ms = 1 AND b.attempt_http_status IS NULL),
		(SELECT count(*) FROM batchclaim.batch_history WHERE to_state = 'INFLIGHT')`).Scan(&rows, &commits, &whole, &marksLeft); err != nil {
		t.Fatal(err)
	}
	if rows != 0 || commits != n-2 || whole != n-2 || marksLeft != n-1 {
		t.Fatalf("%d attempt rows, %d commits in the history, %d batch rows with the whole attempt and %d marks in the history; want 0, %d, %d and %d (svc-01's mark still in flight)",
			rows, commits, whole, marksLeft, n-2, n-2, n-1)
	}
}

func state(t *testing.T, pool *pgxpool.Pool, seq int64) string {
	t.Helper()
	st, _ := unknownCount(t, pool, seq)
	return st
}
