package submitter_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/claims"
	"github.com/batchclaim/batchclaim/submitter"
)

// waitingRecorder holds each outcome's write until its context ends or release is closed.
type waitingRecorder struct {
	entered chan batchclaim.Outcome
	release chan struct{}
	ended   chan error
}

func (r *waitingRecorder) Finish(ctx context.Context, o batchclaim.Outcome) (submitter.Job, bool, error) {
	r.entered <- o
	select {
	case <-ctx.Done():
		r.ended <- ctx.Err()
		return submitter.Job{}, false, ctx.Err()
	case <-r.release:
		r.ended <- nil
		return submitter.Job{}, false, nil
	}
}

// A running job's call is reachable by CancelJob at its attempt only, and only while the call
// runs; Calls and Overdue count it for as long. Once the call returned and the outcome waits
// for its write, neither counts it and CancelJob does not reach it; Cancel still ends the
// write (a stopping instance whose drain took too long records nothing more).
func TestRunningCallRegistry(t *testing.T) {
	t.Parallel()
	called := make(chan struct{})
	sub := submitter.SubmitterFunc(func(ctx context.Context, _ batchclaim.Batch) (batchclaim.Result, error) {
		close(called)
		<-ctx.Done()
		return batchclaim.Result{}, context.Cause(ctx)
	})
	rec := &waitingRecorder{entered: make(chan batchclaim.Outcome, 1), release: make(chan struct{}), ended: make(chan error, 1)}
	p, err := submitter.New(sub, rec, nil, submitter.Config{Workers: 1, Timeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	const seq = 41
	p.TrySubmit(submitter.Job{Claim: claims.Claim{ServiceID: "svc", Epoch: 1}, Batch: batchclaim.Batch{Seq: seq, ServiceID: "svc", Attempts: 2}})
	<-called

	if got := p.Calls(); len(got) != 1 || got[seq] != 3 {
		t.Fatalf("Calls() = %v while the call runs, want {%d: 3}", got, seq)
	}
	if n := p.Overdue(time.Now(), 0); n != 0 {
		t.Errorf("Overdue(now, 0) = %d before the call's deadline", n)
	}
	if n := p.Overdue(time.Now().Add(time.Minute), 0); n != 1 {
		t.Errorf("Overdue a minute on = %d, want the running call", n)
	}
	if p.CancelJob(seq, 2, nil) || p.CancelJob(seq+1, 3, nil) {
		t.Fatal("CancelJob reached the call at another attempt or seq")
	}
	cause := batchclaim.CancelCause("an operator's cancel")
	if !p.CancelJob(seq, 3, cause) {
		t.Fatal("CancelJob did not reach the running call at its attempt")
	}
	o := <-rec.entered
	if !strings.Contains(o.Result.Detail, cause.Error()) {
		t.Errorf("the cancelled call's result %+v does not carry the cancel", o.Result)
	}

	// The call returned; its outcome waits for the write.
	if got := p.Calls(); len(got) != 0 {
		t.Errorf("Calls() = %v once the call returned", got)
	}
	if n := p.Overdue(time.Now().Add(time.Minute), 0); n != 0 {
		t.Errorf("Overdue = %d once the call returned: a slow outcome's write is not a Submitter past its deadline", n)
	}
	if p.CancelJob(seq, 3, cause) {
		t.Error("CancelJob reached a call that returned")
	}
	p.Cancel()
	select {
	case err := <-rec.ended:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("the outcome's write ended with %v, want its context cancelled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Cancel did not end the outcome's write")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.Wait(ctx); err != nil {
		t.Fatal(err)
	}
}

// The jobs a worker runs in a row under one claim share the parent of their calls'
// contexts; CancelJob ends that parent with its cause. The job it reaches ends with the
// cause; the next job of the row runs under a parent made again, and a CancelJob that comes
// for a job once its call returned reaches neither it nor the job running after it.
func TestCancelJobInARowEndsThatJobAlone(t *testing.T) {
	t.Parallel()
	c := batchclaim.Claim{ServiceID: "svc", Epoch: 1, ClaimedAt: time.Unix(1, 0)}
	job := func(seq int64) submitter.Job {
		return submitter.Job{Claim: c, Batch: batchclaim.Batch{Seq: seq, ServiceID: "svc", BatchID: "b"}}
	}
	started := map[int64]chan struct{}{1: make(chan struct{}), 2: make(chan struct{}), 3: make(chan struct{})}
	proceed := make(chan struct{})
	causes := make(chan error, 3)
	sub := submitter.SubmitterFunc(func(ctx context.Context, b batchclaim.Batch) (batchclaim.Result, error) {
		close(started[b.Seq])
		switch b.Seq {
		case 1:
			<-ctx.Done()
		case 2:
			<-proceed
		}
		causes <- context.Cause(ctx)
		return batchclaim.Result{Verdict: batchclaim.Done}, nil
	})
	rec := &chainRecorder{next: []submitter.Job{job(2), job(3)}}
	p, err := submitter.New(sub, rec, nil, submitter.Config{Workers: 1, Timeout: time.Minute,
		MayChain: func(submitter.Job, int) bool { return true }})
	if err != nil {
		t.Fatal(err)
	}
	p.TrySubmit(job(1))
	<-started[1]
	cause := batchclaim.CancelCause("an operator's cancel")
	if !p.CancelJob(1, 1, cause) {
		t.Fatal("CancelJob did not reach job 1 while it ran")
	}
	<-started[2]
	if p.CancelJob(1, 1, cause) {
		t.Error("CancelJob reached job 1 after its call returned")
	}
	close(proceed)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	for seq := int64(1); seq <= 3; seq++ {
		got := <-causes
		if want := seq == 1; errors.Is(got, batchclaim.ErrCancelled) != want || (!want && got != nil) {
			t.Errorf("job %d ended with cause %v; cancelled: want %t", seq, got, want)
		}
	}
}
