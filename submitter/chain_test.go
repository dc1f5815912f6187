package submitter_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/submitter"
)

// chainRecorder chains each outcome to the next job of its list, whatever the claims.
type chainRecorder struct {
	mu   sync.Mutex
	next []submitter.Job
}

func (r *chainRecorder) Finish(ctx context.Context, o batchclaim.Outcome) (submitter.Job, bool, error) {
	if err := ctx.Err(); err != nil {
		return submitter.Job{}, false, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.next) == 0 || !o.Chain {
		return submitter.Job{}, false, nil
	}
	n := r.next[0]
	r.next = r.next[1:]
	return n, true, nil
}

// A worker that runs a service_id's jobs in a row runs each under its own claim: the claim
// in its context and the claim's context are those of the job, also when a chained job comes
// with a claim other than its predecessor's (a later epoch): the loss of that claim ends the
// call and keeps its outcome from being written.
func TestChainedJobsRunUnderTheirClaim(t *testing.T) {
	t.Parallel()
	claim := func(epoch int64, ctx context.Context) batchclaim.Claim {
		return batchclaim.Claim{ServiceID: "svc", Epoch: epoch, ClaimedAt: time.Unix(epoch, 0)}.WithContext(ctx)
	}
	job := func(c batchclaim.Claim, seq int64) submitter.Job {
		return submitter.Job{Claim: c, Batch: batchclaim.Batch{Seq: seq, ServiceID: "svc", BatchID: "b"}}
	}
	first, second := context.Background(), context.WithValue(context.Background(), struct{}{}, "second")
	third, lose := context.WithCancel(context.Background())
	defer lose()
	rec := &chainRecorder{next: []submitter.Job{job(claim(1, first), 2), job(claim(2, second), 3), job(claim(3, third), 4), job(claim(3, third), 5)}}

	type seen struct {
		epoch  int64
		second bool // the context carries the second claim's context's value
		ended  bool
	}
	var mu sync.Mutex
	calls := map[int64]seen{}
	sub := submitter.SubmitterFunc(func(ctx context.Context, b batchclaim.Batch) (batchclaim.Result, error) {
		c, _ := batchclaim.ClaimFrom(ctx)
		if b.Seq == 4 {
			lose() // the third claim is lost while its job runs
		}
		mu.Lock()
		calls[b.Seq] = seen{c.Epoch, ctx.Value(struct{}{}) == "second", ctx.Err() != nil}
		mu.Unlock()
		return batchclaim.Result{Verdict: batchclaim.Done}, nil
	})
	p, err := submitter.New(sub, rec, nil, submitter.Config{Workers: 1, Timeout: time.Minute,
		MayChain: func(submitter.Job, int) bool { return true }})
	if err != nil {
		t.Fatal(err)
	}
	p.TrySubmit(job(claim(1, first), 1))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	want := map[int64]seen{1: {1, false, false}, 2: {1, false, false}, 3: {2, true, false}, 4: {3, false, true}}
	for seq, w := range want {
		if got, ok := calls[seq]; !ok || got != w {
			t.Errorf("job %d: called %v with (epoch, second claim's context, ended) = %+v, want %+v", seq, ok, got, w)
		}
	}
	if _, ok := calls[5]; ok {
		t.Error("job 5 ran: job 4's outcome was written under a claim that was gone")
	}
}
