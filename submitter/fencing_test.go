package submitter_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/claims"
	"github.com/batchclaim/batchclaim/ingest"
	"github.com/batchclaim/batchclaim/observer"
	"github.com/batchclaim/batchclaim/submitter"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
)

// A claim lost while its POST runs cancels the POST; the late answer is refused by the epoch
// check and the new owner's view of the batch is untouched.
func TestClaimLostMidPost(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.NewPool(t)
	timings := claims.Config{RenewInterval: 100 * time.Millisecond, Expiry1: time.Second, Expiry2: 4 * time.Second}
	newEngine := func(name string) *claims.Engine {
		c := timings
		c.Name = name
		e, err := claims.New(dbtest.Open(t, pool, ""), c)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Register(ctx); err != nil {
			t.Fatal(err)
		}
		return e
	}
	stored, err := ingest.Enqueue(ctx, pool, "svc", "batch-1", []byte("payload"))
	if err != nil {
		t.Fatal(err)
	}
	a := newEngine("a")
	if _, err := a.Cycle(ctx); err != nil {
		t.Fatal(err)
	}
	claim, ok := a.Holds("svc")
	if !ok {
		t.Fatal("a does not hold svc")
	}
	rec, err := observer.NewRecorder(dbtest.Open(t, pool, ""), a, observer.RecorderConfig{})
	if err != nil {
		t.Fatal(err)
	}

	started, cancelled := make(chan struct{}), make(chan error, 1)
	answer := make(chan struct{})
	sub := submitter.SubmitterFunc(func(ctx context.Context, b batchclaim.Batch) (batchclaim.Result, error) {
		close(started)
		<-ctx.Done() // the POST hangs until cancelled
		cancelled <- ctx.Err()
		<-answer // ... and its answer arrives late
		return batchclaim.Result{Verdict: batchclaim.Accepted, HTTPStatus: 202}, nil
	})
	done := make(chan struct{})
	p, err := submitter.New(sub, rec, func(submitter.Job) { close(done) }, submitter.Config{Workers: 1, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	job := submitter.Job{Claim: claim, FromState: batchclaim.StateNew, Reason: "first",
		Batch: batchclaim.Batch{Seq: stored.Seq, ServiceID: "svc", BatchID: "batch-1", Payload: []byte("payload")}}
	marked, err := rec.Mark(ctx, []batchclaim.Job{job})
	if err != nil || len(marked) != 1 {
		t.Fatalf("mark in flight: %v, %d marked", err, len(marked))
	}
	job = marked[0]
	if !p.TrySubmit(job) {
		t.Fatal("no free worker")
	}
	<-started

	// b sees a's lease past expiry_2 (a is busy, so only the slow path applies) and takes svc.
	b := newEngine("b")
	b.ShiftDBTime(5 * time.Second)
	if _, err := b.Cycle(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok := b.Holds("svc"); !ok {
		t.Fatal("b did not take svc past expiry_2")
	}
	// a's next cycle learns it lost svc, which cancels the POST.
	if _, err := a.Cycle(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-cancelled:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("POST ended with %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("losing the claim did not cancel the POST")
	}
	close(answer)
	<-done

	// The late answer, recorded directly with a's stale claim, is refused by the epoch check.
	_, _, err = rec.Finish(ctx, batchclaim.Outcome{Job: job, Result: batchclaim.Result{Verdict: batchclaim.Accepted}, Latency: time.Millisecond})
	if !errors.Is(err, batchclaim.ErrClaimLost) {
		t.Fatalf("late result: %v, want ErrClaimLost", err)
	}
	var state string
	var epoch int64
	if err := pool.QueryRow(ctx, `SELECT state, claim_epoch FROM batchclaim.batches WHERE seq = $1`, stored.Seq).Scan(&state, &epoch); err != nil {
		t.Fatal(err)
	}
	if state != "INFLIGHT" || epoch != job.Claim.Epoch {
		t.Fatalf("batch is %s@%d, want INFLIGHT@%d left for the new owner to adopt", state, epoch, job.Claim.Epoch)
	}
	if a.Stats().StaleWritesRejected == 0 {
		t.Fatal("the refused late write was not counted")
	}
}
