package submitter_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/claims"
	"github.com/batchclaim/batchclaim/submitter"
)

// fakeRecorder records outcomes without a database.
type fakeRecorder struct {
	mu       sync.Mutex
	finished []batchclaim.Result
}

func (r *fakeRecorder) Finish(_ context.Context, o batchclaim.Outcome) (submitter.Job, bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.finished = append(r.finished, o.Result)
	return submitter.Job{}, false, nil
}

// fakeLease answers what a claim engine would: whether the claim is held, and the deadline.
type fakeLease struct {
	held     bool
	epoch    int64
	deadline time.Time
}

func (l fakeLease) Holds(id string) (claims.Claim, bool) {
	return claims.Claim{ServiceID: id, Epoch: l.epoch}, l.held
}
func (l fakeLease) Deadline() time.Time { return l.deadline }

// Between the committed in-flight mark and the call, the claim may be gone, or the local
// deadline may have passed without the watchdog having run yet (a process resumed from a long
// pause). The pool checks right before the call and then does not post at all; otherwise it
// bounds the call by the local deadline.
func TestNoPostWithoutALiveLease(t *testing.T) {
	t.Parallel()
	job := submitter.Job{Claim: claims.Claim{ServiceID: "svc", Epoch: 7}, Batch: batchclaim.Batch{Seq: 1, ServiceID: "svc", BatchID: "b"}}
	tests := []struct {
		name     string
		lease    fakeLease
		wantPost bool
	}{
		{"held, deadline ahead: posts", fakeLease{held: true, epoch: 7, deadline: time.Now().Add(time.Hour)}, true},
		{"claim no longer held", fakeLease{held: false, epoch: 7, deadline: time.Now().Add(time.Hour)}, false},
		{"held with a newer epoch", fakeLease{held: true, epoch: 8, deadline: time.Now().Add(time.Hour)}, false},
		{"local deadline passed, watchdog not run yet", fakeLease{held: true, epoch: 7, deadline: time.Now().Add(-time.Second)}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			posted := 0
			sub := submitter.SubmitterFunc(func(context.Context, batchclaim.Batch) (batchclaim.Result, error) {
				mu.Lock()
				posted++
				mu.Unlock()
				return batchclaim.Result{Verdict: batchclaim.Done}, nil
			})
			p, err := submitter.New(sub, &fakeRecorder{}, nil, submitter.Config{Workers: 1, Timeout: time.Minute, Lease: tt.lease})
			if err != nil {
				t.Fatal(err)
			}
			if !p.TrySubmit(job) {
				t.Fatal("no free worker")
			}
			if err := p.Wait(context.Background()); err != nil {
				t.Fatal(err)
			}
			if got := posted == 1; got != tt.wantPost {
				t.Fatalf("posted %d times, want a post: %v", posted, tt.wantPost)
			}
		})
	}
}

// Cancel ends running submissions (a stop whose drain took too long) and Running says which
// service_ids still have one.
func TestCancelEndsRunningSubmissions(t *testing.T) {
	t.Parallel()
	entered := make(chan struct{})
	sub := submitter.SubmitterFunc(func(ctx context.Context, _ batchclaim.Batch) (batchclaim.Result, error) {
		close(entered)
		<-ctx.Done()
		return batchclaim.Result{}, ctx.Err()
	})
	p, err := submitter.New(sub, &fakeRecorder{}, nil, submitter.Config{Workers: 2, Timeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	p.TrySubmit(submitter.Job{Claim: claims.Claim{ServiceID: "svc", Epoch: 1}, Batch: batchclaim.Batch{ServiceID: "svc"}})
	<-entered
	if r := p.Running(); len(r) != 1 || r[0] != "svc" {
		t.Fatalf("Running() = %v, want [svc]", r)
	}
	p.Cancel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.Wait(ctx); err != nil {
		t.Fatalf("a cancelled submission did not end: %v", err)
	}
	if r := p.Running(); len(r) != 0 {
		t.Fatalf("Running() = %v after the submission ended", r)
	}
}
