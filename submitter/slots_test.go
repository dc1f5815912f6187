package submitter_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/claims"
	"github.com/batchclaim/batchclaim/submitter"
)

// heldRecorder holds every outcome's write until released, and chains to next (once) when
// asked to.
type heldRecorder struct {
	writing chan int64    // the seq of each outcome whose write began
	release chan struct{} // closed: the writes go through
	mu      sync.Mutex
	next    *submitter.Job
}

func (r *heldRecorder) Finish(_ context.Context, o batchclaim.Outcome) (submitter.Job, bool, error) {
	r.writing <- o.Job.Batch.Seq
	<-r.release
	r.mu.Lock()
	defer r.mu.Unlock()
	if n := r.next; n != nil && o.Chain && n.Batch.ServiceID == o.Job.Batch.ServiceID {
		r.next = nil
		return *n, true, nil
	}
	return submitter.Job{}, false, nil
}

func slotJob(svc string, seq int64) submitter.Job {
	return submitter.Job{Claim: claims.Claim{ServiceID: svc, Epoch: 1}, Batch: batchclaim.Batch{Seq: seq, ServiceID: svc, BatchID: svc}}
}

// slotPool is a one-worker pool whose Submitter logs each call (and, for the seqs in hold,
// waits until that channel is closed), whose recorder holds the writes, and whose first
// outcome written for service_id "a" chains job 3 of "a".
type slotPool struct {
	*submitter.Pool
	rec     *heldRecorder
	entered chan int64 // the seq of each call, as it starts
	mu      sync.Mutex
	calls   []int64
}

func newSlotPool(t *testing.T, hold map[int64]chan struct{}) *slotPool {
	t.Helper()
	chained := slotJob("a", 3)
	sp := &slotPool{rec: &heldRecorder{writing: make(chan int64, 4), release: make(chan struct{}), next: &chained},
		entered: make(chan int64, 4)}
	sub := submitter.SubmitterFunc(func(_ context.Context, b batchclaim.Batch) (batchclaim.Result, error) {
		sp.mu.Lock()
		sp.calls = append(sp.calls, b.Seq)
		sp.mu.Unlock()
		sp.entered <- b.Seq
		if h, ok := hold[b.Seq]; ok {
			<-h
		}
		return batchclaim.Result{Verdict: batchclaim.Done}, nil
	})
	p, err := submitter.New(sub, sp.rec, nil, submitter.Config{Workers: 1, Timeout: time.Minute,
		MayChain: func(submitter.Job, int) bool { return true }})
	if err != nil {
		t.Fatal(err)
	}
	sp.Pool = p
	return sp
}

// ended waits for every job to end and checks the calls' order and that the worker is free.
func (sp *slotPool) ended(t *testing.T, want ...int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := sp.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if !slices.Equal(sp.calls, want) {
		t.Fatalf("calls %v, want %v", sp.calls, want)
	}
	if f := sp.Free(); f != 1 {
		t.Fatalf("Free() = %d after every job ended, want 1", f)
	}
}

// A worker is free as soon as its Submitter call returned: the outcome's write, which waits
// for the recorder, takes no slot; Workers bounds the calls. A job chained by that write (the
// service_id's next batch, marked in flight already) waits for a slot and then runs.
func TestOutcomeWriteHoldsNoWorker(t *testing.T) {
	t.Parallel()
	p := newSlotPool(t, nil)
	if !p.TrySubmit(slotJob("a", 1)) {
		t.Fatal("no free worker for the first job")
	}
	if seq := <-p.rec.writing; seq != 1 {
		t.Fatalf("outcome of seq %d written first, want 1", seq)
	}
	// Job 1's outcome is being written: the one worker is free for another service_id.
	if f := p.Free(); f != 1 {
		t.Fatalf("Free() = %d while only an outcome is being written, want 1", f)
	}
	if !p.TrySubmit(slotJob("b", 2)) {
		t.Fatal("no free worker while only an outcome was being written")
	}
	if seq := <-p.rec.writing; seq != 2 {
		t.Fatalf("outcome of seq %d written second, want 2", seq)
	}
	close(p.rec.release)
	p.ended(t, 1, 2, 3) // the chained job runs once the worker is free
	if <-p.rec.writing != 3 {
		t.Fatal("the chained job's outcome was not written")
	}
}

// The queuer counts Free, marks that many heads in flight, then hands them out; meanwhile a
// job chained by an outcome's write may take the worker it counted. The job handed out then
// waits for the next worker instead of being turned away (it is marked in flight), and Free
// counts it as waiting, so no more are handed out than can run.
func TestHandOutWaitsForAWorkerAChainTook(t *testing.T) {
	t.Parallel()
	hold := map[int64]chan struct{}{3: make(chan struct{})}
	p := newSlotPool(t, hold)
	if !p.TrySubmit(slotJob("a", 1)) {
		t.Fatal("no worker for the first job")
	}
	<-p.entered
	<-p.rec.writing // job 1's call returned; its outcome is being written
	if f := p.Free(); f != 1 {
		t.Fatalf("Free() = %d while job 1's outcome is written, want 1", f)
	}
	// The queuer counted that worker. Before it hands its job out, the write chains job 3,
	// which takes the worker and runs (held).
	close(p.rec.release)
	if seq := <-p.entered; seq != 3 {
		t.Fatalf("seq %d called, want the chained job 3", seq)
	}
	if !p.TrySubmit(slotJob("b", 2)) {
		t.Fatal("a job marked in flight was turned away because a chained job took its worker")
	}
	if f, b := p.Free(), p.Busy(); f != 0 || b != 1 {
		t.Fatalf("Free() = %d, Busy() = %d with job 3 running and job 2 waiting, want 0 and 1", f, b)
	}
	select {
	case seq := <-p.entered:
		t.Fatalf("seq %d called while the one worker runs job 3", seq)
	default:
	}
	close(hold[3])
	if seq := <-p.entered; seq != 2 {
		t.Fatalf("seq %d called, want job 2 once job 3's call returned", seq)
	}
	p.ended(t, 1, 3, 2)
}

// A cancelled pool starts nothing more.
func TestCancelledPoolStartsNothing(t *testing.T) {
	t.Parallel()
	sub := submitter.SubmitterFunc(func(context.Context, batchclaim.Batch) (batchclaim.Result, error) {
		t.Error("a cancelled pool called the Submitter")
		return batchclaim.Result{Verdict: batchclaim.Done}, nil
	})
	p, err := submitter.New(sub, &fakeRecorder{}, nil, submitter.Config{Workers: 1, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	p.Cancel()
	if p.TrySubmit(slotJob("a", 1)) {
		t.Fatal("a cancelled pool took a job")
	}
	if err := p.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
}
