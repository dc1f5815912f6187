package queuer_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/ingest"
	"github.com/batchclaim/batchclaim/observer"
	"github.com/batchclaim/batchclaim/queuer"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
)

// A job whose outcome left its service_id without work ends without another read of the
// service_id's head: at a steady arrival rate every job cost one more statement that found
// nothing. The queuer looks again when it was told about the service_id while the job ran
// (an enqueue that committed after the outcome's write looked), and when the outcome left
// work behind.
func TestDoneAfterADrainingOutcomeReadsNoHead(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool, counted := tracedPool(t)
	if _, err := ingest.Enqueue(ctx, pool, "svc", "b1", []byte("x")); err != nil {
		t.Fatal(err)
	}
	eng := engine(t, pool)
	var q *queuer.Queuer
	var recorded, drained atomic.Int64
	rec, err := observer.NewRecorder(dbtest.Open(t, pool, ""), eng, observer.RecorderConfig{
		Recorded: func(id string) { recorded.Add(1); q.Dirty(id) },
		Drained:  func(id string, seq int64) { drained.Add(1); q.Drained(id, seq) },
	})
	if err != nil {
		t.Fatal(err)
	}
	d := &dispatcher{free: 2} // one worker more than the service_id's job takes
	q, err = queuer.New(dbtest.Open(t, pool, ""), eng, d, &recorder{Recorder: rec}, queuer.Config{Interval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	// run hands out the service_id's next job and runs it to its end: outcome, then Done.
	run := func(batchID string, during func()) {
		t.Helper()
		d.got = nil
		q.Dirty("svc")
		if _, err := q.Fetch(ctx); err != nil {
			t.Fatal(err)
		}
		if len(d.got) != 1 || d.got[0].Batch.BatchID != batchID {
			t.Fatalf("handed out %+v, want %s", d.got, batchID)
		}
		j := d.got[0]
		if during != nil {
			during()
		}
		if _, _, err := rec.Finish(ctx, batchclaim.Outcome{Job: j, Result: batchclaim.Result{Verdict: batchclaim.Done}}); err != nil {
			t.Fatal(err)
		}
		q.Done(j)
	}
	fetchTakes := func() int {
		t.Helper()
		before := counted.count()
		if d.Free() == 0 {
			t.Fatal("no worker free: a fetch would read nothing whatever it was told")
		}
		if _, err := q.Fetch(ctx); err != nil {
			t.Fatal(err)
		}
		return counted.count() - before
	}

	// Drained: Done queues nothing, and the next fetch reads nothing.
	run("b1", nil)
	if drained.Load() != 1 || recorded.Load() != 0 {
		t.Fatalf("drained %d, recorded %d: want the outcome reported drained", drained.Load(), recorded.Load())
	}
	if n := fetchTakes(); n != 0 {
		t.Fatalf("the fetch after a drained job read heads %d times, want none", n)
	}

	// Told about the service_id while its job ran: the enqueue of b3 woke the queuer then,
	// and committed only after the outcome's write looked.
	if _, err := ingest.Enqueue(ctx, pool, "svc", "b2", []byte("x")); err != nil {
		t.Fatal(err)
	}
	run("b2", func() {
		q.Dirty("svc")
		if n := fetchTakes(); n != 0 { // the service_id is busy: no read, but noted
			t.Fatalf("a fetch read the heads of a busy service_id (%d)", n)
		}
	})
	if drained.Load() != 2 {
		t.Fatalf("the outcome of b2 was not reported drained (%d)", drained.Load())
	}
	if _, err := ingest.Enqueue(ctx, pool, "svc", "b3", []byte("x")); err != nil {
		t.Fatal(err)
	}
	d.got = nil
	if _, err := q.Fetch(ctx); err != nil { // Done queued it: b3 goes without a further wake-up
		t.Fatal(err)
	}
	if len(d.got) != 1 || d.got[0].Batch.BatchID != "b3" {
		t.Fatalf("handed out %+v after a wake-up during the job, want b3", d.got)
	}
	j3 := d.got[0]

	// Work left behind (b4 was there when b3's outcome was written, not chained): Recorded,
	// and Done looks again.
	if _, err := ingest.Enqueue(ctx, pool, "svc", "b4", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := rec.Finish(ctx, batchclaim.Outcome{Job: j3, Result: batchclaim.Result{Verdict: batchclaim.Done}}); err != nil {
		t.Fatal(err)
	}
	if drained.Load() != 2 || recorded.Load() != 1 {
		t.Fatalf("drained %d, recorded %d after an outcome with work behind it", drained.Load(), recorded.Load())
	}
	q.Done(j3)
	d.got = nil
	if _, err := q.Fetch(ctx); err != nil {
		t.Fatal(err)
	}
	if len(d.got) != 1 || d.got[0].Batch.BatchID != "b4" {
		t.Fatalf("handed out %+v, want b4", d.got)
	}
}
