package queuer_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/ingest"
	"github.com/batchclaim/batchclaim/observer"
	"github.com/batchclaim/batchclaim/queuer"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
)

// running starts a queuer on pool's claims, handing out to d, with a recorder that tells it
// what a node's does (Recorded, Drained), and an Interval of an hour, so that only a wake-up
// makes it fetch after its first look at every claim. It runs until the test ends.
func running(t *testing.T, pool *pgxpool.Pool, d *dispatcher) (*queuer.Queuer, *observer.Recorder) {
	t.Helper()
	eng := engine(t, pool)
	var q *queuer.Queuer
	rec, err := observer.NewRecorder(dbtest.Open(t, pool, ""), eng, observer.RecorderConfig{
		Recorded: func(id string) { q.Dirty(id) },
		Drained:  func(id string, seq int64) { q.Drained(id, seq) },
	})
	if err != nil {
		t.Fatal(err)
	}
	q, err = queuer.New(dbtest.Open(t, pool, ""), eng, d, &recorder{Recorder: rec}, queuer.Config{Interval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- q.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return q, rec
}

// handOuts waits, far longer than a fetch takes, for the dispatcher to hold n jobs, and
// fails the test if it does not: the queuer runs with an Interval of an hour, so only a
// wake-up can have made it fetch.
func handOuts(t *testing.T, d *dispatcher, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for len(d.handedOut()) < n {
		if time.Now().After(deadline) {
			t.Fatalf("handed out %v, want %d jobs: the queuer did not fetch again", d.handedOut(), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// end finishes the dispatcher's job of serviceID (its outcome written, its worker and memory
// free), then tells the queuer, in the order a worker does.
func end(t *testing.T, rec *observer.Recorder, q *queuer.Queuer, d *dispatcher, serviceID string) {
	t.Helper()
	d.mu.Lock()
	var j batchclaim.Job
	for i, g := range d.got {
		if g.Claim.ServiceID == serviceID {
			j = g
			d.got = append(d.got[:i], d.got[i+1:]...)
			break
		}
	}
	d.mu.Unlock()
	if j.Claim.ServiceID == "" {
		t.Fatalf("no job of %s handed out", serviceID)
	}
	if _, _, err := rec.Finish(t.Context(), batchclaim.Outcome{Job: j, Result: batchclaim.Result{Verdict: batchclaim.Done}}); err != nil {
		t.Fatal(err)
	}
	q.Done(j)
}

// With more service_ids ready than workers, a job whose outcome leaves its service_id
// without work frees its worker for the ones that waited at once: its Done wakes the queuer
// although nothing is queued for its own service_id. (It waited for the next Interval before,
// so a backlog of one job a key went out a round of workers per Interval.)
func TestADrainedJobsWorkerGoesToTheWaitingKeys(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.NewPool(t)
	for s := range 3 {
		if _, err := ingest.Enqueue(ctx, pool, fmt.Sprintf("svc-%d", s), "b0", []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	d := &dispatcher{free: 1}
	q, rec := running(t, pool, d)

	ran := map[string]bool{}
	for range 3 {
		handOuts(t, d, 1)
		id := d.handedOut()[0]
		if ran[id] {
			t.Fatalf("%s handed out twice", id)
		}
		ran[id] = true
		end(t, rec, q, d, id)
	}
	if len(ran) != 3 {
		t.Fatalf("ran %v, want the three service_ids", ran)
	}
}

// A fetch whose ready heads all wait for memory (workers are free) is not followed by
// another at once: the next would read the same heads and find the same budget, and the
// queuer sent thousands of statements a second until a running job ended. The job's end
// frees the memory and the waiting head goes then.
func TestAHeadWaitingForMemoryIsNotReadAgainUntilAJobEnds(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool, counted := tracedPool(t)
	if _, err := ingest.Enqueue(ctx, pool, "svc-1", "b0", make([]byte, 10)); err != nil {
		t.Fatal(err)
	}
	if _, err := ingest.Enqueue(ctx, pool, "svc-2", "b0", make([]byte, 100)); err != nil {
		t.Fatal(err)
	}
	d := &dispatcher{free: 10, mem: 25}
	q, rec := running(t, pool, d)

	handOuts(t, d, 1)
	if got := d.handedOut(); fmt.Sprint(got) != "[svc-1]" {
		t.Fatalf("handed out %v, want the 10-byte batch (the 100-byte one waits for memory)", got)
	}
	before := counted.count()
	time.Sleep(300 * time.Millisecond)
	// Nothing changed in these 300 ms; a statement or two may have been on its way.
	if n := counted.count() - before; n > 2 {
		t.Fatalf("%d fetches while the waiting head's memory stayed taken, want none", n)
	}
	end(t, rec, q, d, "svc-1")
	handOuts(t, d, 1)
	if got := d.handedOut(); fmt.Sprint(got) != "[svc-2]" {
		t.Fatalf("after the small job ended: handed out %v, want svc-2", got)
	}
}
