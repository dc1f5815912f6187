package observer

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/claims"
	"github.com/batchclaim/batchclaim/ingest"
	"github.com/batchclaim/batchclaim/pgdb"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
)

// gated passes statements through to the database, holding each group write of outcomes
// until the test lets it go.
type gated struct {
	pgdb.Querier
	started chan []any // each group write's arguments, as it starts
	release chan struct{}
}

func (g *gated) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if strings.HasPrefix(sql, "-- name: BatchesRecord") {
		g.started <- args
		<-g.release
	}
	return g.Querier.Query(ctx, sql, args...)
}

// handoffSetup stores one batch of each service_id, claims them all, and returns a recorder
// whose group writes wait at a gate, with each batch marked in flight.
func handoffSetup(t *testing.T, services ...string) (*pgxpool.Pool, *Recorder, *gated, map[string]batchclaim.Job) {
	t.Helper()
	ctx := t.Context()
	pool := dbtest.NewPool(t)
	for _, svc := range services {
		if _, err := ingest.Enqueue(ctx, pool, svc, "b1", []byte("p")); err != nil {
			t.Fatal(err)
		}
	}
	eng := claimAll(t, pool)
	rec, err := NewRecorder(dbtest.Open(t, pool, ""), eng, RecorderConfig{})
	if err != nil {
		t.Fatal(err)
	}
	jobs := map[string]batchclaim.Job{}
	for _, svc := range services {
		jobs[svc] = markOnly(t, pool, eng, rec, svc)
	}
	g := &gated{Querier: rec.db, started: make(chan []any), release: make(chan struct{})}
	rec.db = g
	return pool, rec, g, jobs
}

// markOnly marks svc's only batch, stored with batch id b1, in flight for eng's claim.
func markOnly(t *testing.T, pool *pgxpool.Pool, eng *claims.Engine, rec *Recorder, svc string) batchclaim.Job {
	t.Helper()
	c, ok := eng.Holds(svc)
	if !ok {
		t.Fatalf("the engine does not hold %s", svc)
	}
	var seq int64
	if err := pool.QueryRow(t.Context(), `SELECT seq FROM batchclaim.batches WHERE service_id = $1`, svc).Scan(&seq); err != nil {
		t.Fatal(err)
	}
	marked, err := rec.Mark(t.Context(), []batchclaim.Job{{Claim: c, FromState: batchclaim.StateNew, Reason: batchclaim.ReasonFirst,
		Batch: batchclaim.Batch{Seq: seq, ServiceID: svc, BatchID: "b1"}}})
	if err != nil || len(marked) != 1 {
		t.Fatalf("mark %s: %d marked, %v", svc, len(marked), err)
	}
	return marked[0]
}

// finishAsync calls rec.Finish for job in a goroutine and returns where its error arrives.
func finishAsync(ctx context.Context, rec *Recorder, job batchclaim.Job) <-chan error {
	res := make(chan error, 1)
	go func() {
		_, _, err := rec.Finish(ctx, batchclaim.Outcome{Job: job, Result: batchclaim.Result{Verdict: batchclaim.Done}})
		res <- err
	}()
	return res
}

// writeStarts waits for the next group write to reach the gate and returns the service_ids
// it writes.
func writeStarts(t *testing.T, g *gated, what string) []string {
	t.Helper()
	select {
	case args := <-g.started:
		return args[2].([]string) // both statements take service_ids second, after skip_valid
	case <-time.After(10 * time.Second):
		t.Fatalf("no group write started in 10s: %s", what)
		return nil
	}
}

func waitPending(t *testing.T, rec *Recorder, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		rec.mu.Lock()
		got := len(rec.pending)
		rec.mu.Unlock()
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d outcomes pending after 10s, want %d", got, n)
		}
	}
}

func result(t *testing.T, res <-chan error, what string) error {
	t.Helper()
	select {
	case err := <-res:
		return err
	case <-time.After(10 * time.Second):
		t.Fatalf("Finish did not return in 10s: %s", what)
		return nil
	}
}

// A Finish returns once the write that holds its own outcome commits. It does not go on to
// write the outcomes that arrived meanwhile: it hands that write to one of their callers. A
// worker that wrote a group would otherwise keep writing while outcomes keep arriving (a
// backlog), and its service_id's next batch would wait for as long as the load lasts.
func TestFinishHandsTheNextWriteOn(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool, rec, g, jobs := handoffSetup(t, "a", "b")
	a := finishAsync(ctx, rec, jobs["a"])
	if got := writeStarts(t, g, "a's outcome"); len(got) != 1 || got[0] != "a" {
		t.Fatalf("the first write holds %v, want [a]", got)
	}
	b := finishAsync(ctx, rec, jobs["b"])
	waitPending(t, rec, 1) // b waits for a's write
	g.release <- struct{}{}
	if got := writeStarts(t, g, "b's outcome, handed on after a's write"); len(got) != 1 || got[0] != "b" {
		t.Fatalf("the second write holds %v, want [b]", got)
	}
	// b's write is held at the gate: a's Finish must have returned all the same.
	if err := result(t, a, "a's Finish, whose write committed, while b's write is held"); err != nil {
		t.Fatalf("finish a: %v", err)
	}
	g.release <- struct{}{}
	if err := result(t, b, "b's Finish"); err != nil {
		t.Fatalf("finish b: %v", err)
	}
	for _, svc := range []string{"a", "b"} {
		var state string
		if err := pool.QueryRow(ctx, `SELECT state FROM batchclaim.batches WHERE service_id = $1`, svc).Scan(&state); err != nil || state != "COMMITTED" {
			t.Fatalf("%s's batch is %s (%v), want COMMITTED", svc, state, err)
		}
	}
}

// A caller that gives up while it waits leaves the pending group: the next write goes to a
// caller still waiting, never to one that left, and the outcome given up is not written.
func TestFinishGivenUpIsNotHandedTheWrite(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool, rec, g, jobs := handoffSetup(t, "a", "b", "c")
	a := finishAsync(ctx, rec, jobs["a"])
	writeStarts(t, g, "a's outcome")
	bctx, cancel := context.WithCancel(ctx)
	b := finishAsync(bctx, rec, jobs["b"])
	waitPending(t, rec, 1)
	c := finishAsync(ctx, rec, jobs["c"])
	waitPending(t, rec, 2) // b first in line, then c
	cancel()
	if err := result(t, b, "b's Finish, given up"); !errors.Is(err, context.Canceled) {
		t.Fatalf("finish b given up: %v, want context.Canceled", err)
	}
	waitPending(t, rec, 1)
	g.release <- struct{}{}
	if got := writeStarts(t, g, "c's outcome, handed to c"); len(got) != 1 || got[0] != "c" {
		t.Fatalf("the second write holds %v, want [c]", got)
	}
	g.release <- struct{}{}
	for svc, res := range map[string]<-chan error{"a": a, "c": c} {
		if err := result(t, res, svc+"'s Finish"); err != nil {
			t.Fatalf("finish %s: %v", svc, err)
		}
	}
	for svc, want := range map[string]string{"a": "COMMITTED", "b": "INFLIGHT", "c": "COMMITTED"} {
		var state string
		if err := pool.QueryRow(ctx, `SELECT state FROM batchclaim.batches WHERE service_id = $1`, svc).Scan(&state); err != nil || state != want {
			t.Fatalf("%s's batch is %s (%v), want %s", svc, state, err, want)
		}
	}
}

// Many callers, some giving up at random moments (before they call, while they wait, while
// their group is written), on a recorder writing for real: a liveness check of the handed-on
// write. Every Finish returns, and the recorder ends with nobody writing and nothing pending
// (the write was never handed to a caller that had left).
func TestFinishUnderLoadNeverLosesTheWrite(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.NewPool(t)
	const keys, perKey = 30, 20
	var services []string
	for k := range keys {
		svc := fmt.Sprintf("k%02d", k)
		services = append(services, svc)
		for i := range perKey {
			if _, err := ingest.Enqueue(ctx, pool, svc, fmt.Sprintf("b%d", i), []byte("p")); err != nil {
				t.Fatal(err)
			}
		}
	}
	eng := claimAll(t, pool)
	rec, err := NewRecorder(dbtest.Open(t, pool, ""), eng, RecorderConfig{})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	returned := make(chan struct{})
	var finished, gaveUp, mixed atomic.Int64
	for _, svc := range services {
		c, _ := eng.Holds(svc)
		var seq int64
		if err := pool.QueryRow(ctx, `SELECT min(seq) FROM batchclaim.batches WHERE service_id = $1`, svc).Scan(&seq); err != nil {
			t.Fatal(err)
		}
		marked, err := rec.Mark(ctx, []batchclaim.Job{{Claim: c, FromState: batchclaim.StateNew, Reason: batchclaim.ReasonFirst,
			Batch: batchclaim.Batch{Seq: seq, ServiceID: svc}}})
		if err != nil || len(marked) != 1 {
			t.Fatalf("mark %s: %d marked, %v", svc, len(marked), err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			job := marked[0]
			for i := 0; ; i++ {
				fctx, cancel := ctx, context.CancelFunc(func() {})
				if rand.IntN(10) == 0 { // about one call in ten may give up, within 1.5 ms
					fctx, cancel = context.WithTimeout(ctx, time.Duration(rand.IntN(1500))*time.Microsecond)
				}
				next, ok, err := rec.Finish(fctx, batchclaim.Outcome{Job: job, Result: batchclaim.Result{Verdict: batchclaim.Done},
					Chain: true, ChainMaxBytes: -1})
				cancel()
				if err != nil {
					gaveUp.Add(1)
					return
				}
				finished.Add(1)
				if !ok {
					return
				}
				// Each caller is told its own result: the waiters are recycled, and one
				// handed back too early would carry another caller's next job.
				if next.Claim.ServiceID != svc || next.Batch.ServiceID != svc || next.Batch.Seq <= job.Batch.Seq {
					mixed.Add(1)
					return
				}
				job = next
			}
		}()
	}
	go func() { wg.Wait(); close(returned) }()
	select {
	case <-returned:
	case <-time.After(60 * time.Second):
		t.Fatalf("callers still in Finish after 60s (%d outcomes written, %d given up)", finished.Load(), gaveUp.Load())
	}
	if n := mixed.Load(); n != 0 {
		t.Fatalf("%d callers were told another service_id's next job", n)
	}
	rec.mu.Lock()
	leading, pending := rec.leading, len(rec.pending)
	rec.mu.Unlock()
	if leading || pending != 0 {
		t.Fatalf("after every caller returned: leading %t, %d pending; want neither", leading, pending)
	}
	var committed int64
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM batchclaim.batches WHERE state = 'COMMITTED'`).Scan(&committed); err != nil {
		t.Fatal(err)
	}
	// An outcome given up may have been written already (its group had taken it): at least
	// every one Finish reported is committed, and at most one more per caller that gave up.
	if committed < finished.Load() || committed > finished.Load()+gaveUp.Load() {
		t.Fatalf("%d batches committed; %d outcomes reported written, %d given up", committed, finished.Load(), gaveUp.Load())
	}
	if finished.Load() < keys*2 || gaveUp.Load() == 0 {
		t.Fatalf("%d outcomes written, %d callers gave up: the load this test means to make did not happen", finished.Load(), gaveUp.Load())
	}
	t.Logf("%d outcomes written, %d callers gave up", finished.Load(), gaveUp.Load())
}
