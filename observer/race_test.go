package observer_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/claims"
	"github.com/batchclaim/batchclaim/ingest"
	"github.com/batchclaim/batchclaim/internal/db"
	"github.com/batchclaim/batchclaim/observer"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
)

// waitLockWait polls (with a deadline) until a statement whose text contains name waits for a
// lock.
func waitLockWait(t *testing.T, pool *pgxpool.Pool, name string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var n int
		if err := pool.QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%' || $1 || '%'`, name).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s statement waits for a lock", name)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// postedUnknown marks b in flight and records an unknown outcome: b is UNKNOWN after its first
// POST. It returns b as stored (one attempt made).
func postedUnknown(t *testing.T, rec *observer.Recorder, c claims.Claim, b batchclaim.Batch) batchclaim.Batch {
	t.Helper()
	ctx := t.Context()
	m, err := rec.Mark(ctx, []batchclaim.Job{{Claim: c, Batch: b, FromState: batchclaim.StateNew, Reason: "first"}})
	if err != nil || len(m) != 1 {
		t.Fatalf("mark: %v, %d marked", err, len(m))
	}
	if _, _, err := rec.Finish(ctx, batchclaim.Outcome{Job: m[0], Result: batchclaim.Result{Verdict: batchclaim.Unknown}}); err != nil {
		t.Fatal(err)
	}
	b.Attempts = 1
	return b
}

func busy(t *testing.T, pool *pgxpool.Pool, svc string) bool {
	t.Helper()
	var b bool
	if err := pool.QueryRow(t.Context(), `SELECT busy FROM batchclaim.service_id_claims_effective WHERE service_id = $1`, svc).Scan(&b); err != nil {
		t.Fatal(err)
	}
	return b
}

// An in-flight mark that races a poll answer about the same head: the poller's write (UNKNOWN
// to COMMITTED) holds the batch while the queuer's mark (UNKNOWN to INFLIGHT, a resubmission)
// waits for it. Once the answer commits, the mark marks nothing, and the claim is neither
// dropped (its fence held: only the head moved on) nor left busy with nothing in flight: past
// its owner's expiry-1 another instance may take it at once.
func TestMarkRacingAPollAnswer(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool, eng, rec, c, b := recorderSetup(t)
	b = postedUnknown(t, rec, c, b)

	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // committed below
	poll := rec.OnTx(dbtest.Open(t, pool, ""), tx)
	if err := poll.RecordStatuses(ctx, []observer.StatusUpdate{{Claim: c, Seq: b.Seq, BatchID: b.BatchID, Attempt: 1,
		From: batchclaim.StateUnknown, Status: batchclaim.StatusCommitted}}); err != nil {
		t.Fatal(err)
	}
	type result struct {
		marked []batchclaim.Job
		err    error
	}
	done := make(chan result, 1)
	go func() {
		m, err := rec.Mark(ctx, []batchclaim.Job{{Claim: c, Batch: b, FromState: batchclaim.StateUnknown, Reason: "resubmit"}})
		done <- result{m, err}
	}()
	waitLockWait(t, pool, "BatchesMarkInflight")
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil || len(r.marked) != 0 {
		t.Fatalf("mark after the answer committed: %d marked, %v; want none", len(r.marked), r.err)
	}
	if st, _ := unknownCount(t, pool, b.Seq); st != "COMMITTED" {
		t.Fatalf("batch %s, want COMMITTED", st)
	}
	if _, ok := eng.Holds("svc"); !ok || eng.Stats().StaleWritesRejected != 0 {
		t.Fatalf("claim held: %v, stale writes counted: %d; want the claim kept and nothing counted", ok, eng.Stats().StaleWritesRejected)
	}
	if busy(t, pool, "svc") {
		t.Fatal("the claim is busy with nothing in flight")
	}
	// Past the owner's expiry-1 (30s) and before its expiry-2, an idle claim goes at once.
	other, err := claims.New(dbtest.Open(t, pool, ""), claims.Config{Name: "other"})
	if err != nil {
		t.Fatal(err)
	}
	other.ShiftDBTime(45 * time.Second)
	if err := other.Register(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Cycle(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok := other.Holds("svc"); !ok {
		t.Fatal("another instance past the owner's expiry-1 could not take the idle claim")
	}
}

// A mark whose head moved on before it ran marks nothing and keeps the claim: the fence held.
func TestMarkOfAHeadThatMovedOnKeepsTheClaim(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool, eng, rec, c, b := recorderSetup(t)
	b = postedUnknown(t, rec, c, b)
	if err := rec.RecordStatuses(ctx, []observer.StatusUpdate{{Claim: c, Seq: b.Seq, BatchID: b.BatchID, Attempt: 1,
		From: batchclaim.StateUnknown, Status: batchclaim.StatusCommitted}}); err != nil {
		t.Fatal(err)
	}
	m, err := rec.Mark(ctx, []batchclaim.Job{{Claim: c, Batch: b, FromState: batchclaim.StateUnknown, Reason: "resubmit"}})
	if err != nil || len(m) != 0 {
		t.Fatalf("mark of a committed head: %d marked, %v", len(m), err)
	}
	if _, ok := eng.Holds("svc"); !ok || eng.Stats().StaleWritesRejected != 0 || eng.Stats().Lost != 0 {
		t.Fatalf("claim held: %v, stale writes %d, lost %d; want it kept", ok, eng.Stats().StaleWritesRejected, eng.Stats().Lost)
	}
	if st, _ := unknownCount(t, pool, b.Seq); st != "COMMITTED" {
		t.Fatalf("batch %s, want COMMITTED", st)
	}
}

// The outcome write is fenced on the attempt: after a batch was adopted and posted again under
// the same claim (an instance that lost track of its own POST), a late outcome of the first
// attempt is refused, and the second attempt's outcome is the one recorded.
func TestLateOutcomeOfAnEarlierAttemptIsRefused(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool, _, rec, c, b := recorderSetup(t)
	m1, err := rec.Mark(ctx, []batchclaim.Job{{Claim: c, Batch: b, FromState: batchclaim.StateNew, Reason: "first"}})
	if err != nil || len(m1) != 1 {
		t.Fatalf("mark 1: %v, %d", err, len(m1))
	}
	stored := b
	stored.Attempts = 1
	if err := rec.Adopt(ctx, []batchclaim.Job{{Claim: c, Batch: stored, Reason: "in flight when this instance lost track of it"}}); err != nil {
		t.Fatal(err)
	}
	m2, err := rec.Mark(ctx, []batchclaim.Job{{Claim: c, Batch: stored, FromState: batchclaim.StateUnknown, Reason: "resubmit"}})
	if err != nil || len(m2) != 1 {
		t.Fatalf("mark 2: %v, %d", err, len(m2))
	}
	_, _, err = rec.Finish(ctx, batchclaim.Outcome{Job: m1[0], Result: batchclaim.Result{Verdict: batchclaim.Done}})
	if !errors.Is(err, batchclaim.ErrStateChanged) {
		t.Fatalf("late outcome of attempt 1: %v, want ErrStateChanged", err)
	}
	var state string
	var attempts int
	if err := pool.QueryRow(ctx, `SELECT state, attempts FROM batchclaim.batches WHERE seq = $1`, b.Seq).Scan(&state, &attempts); err != nil {
		t.Fatal(err)
	}
	if state != "INFLIGHT" || attempts != 2 {
		t.Fatalf("after the late outcome: %s with %d attempts, want INFLIGHT with 2", state, attempts)
	}
	if !busy(t, pool, "svc") {
		t.Fatal("attempt 2 is in flight but the claim is not busy")
	}
	if _, _, err := rec.Finish(ctx, batchclaim.Outcome{Job: m2[0], Result: batchclaim.Result{Verdict: batchclaim.Accepted}}); err != nil {
		t.Fatalf("outcome of attempt 2: %v", err)
	}
	if st, _ := unknownCount(t, pool, b.Seq); st != "PENDING" {
		t.Fatalf("batch %s, want PENDING", st)
	}
	// The log holds both POSTs once each: the first, whose outcome nobody recorded, written by
	// the adoption from its mark (with the mark's transaction), the second whole with its outcome.
	var got []string
	rows, err := pool.Query(ctx, `SELECT a.reason || ' from ' || a.from_state || ': ' || COALESCE(a.outcome, 'none') || '->' || COALESCE(a.to_state, 'none')
		    || ' finished ' || (a.finished_at IS NOT NULL) || ' xid ' || (a.marked_xid IS NOT NULL) || ' epoch ' || (a.epoch = $2)
		FROM batchclaim.submission_attempts a WHERE a.seq = $1 ORDER BY a.started_at`, b.Seq, c.Epoch)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		got = append(got, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"first from NEW: none->none finished false xid true epoch true",
		"resubmit from UNKNOWN: " + batchclaim.Accepted.String() + "->PENDING finished true xid false epoch true",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("attempt log:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// The adoption writes the row of a lost POST only when no row of that POST exists: a mark of
// the previous release wrote its row itself, and a mixed fleet must not log it twice.
func TestAdoptionLogsALostAttemptOnce(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool, _, rec, c, b := recorderSetup(t)
	if _, err := rec.Mark(ctx, []batchclaim.Job{{Claim: c, Batch: b, FromState: batchclaim.StateNew, Reason: "first"}}); err != nil {
		t.Fatal(err)
	}
	// The row the previous release's mark wrote, at the mark's time.
	if _, err := pool.Exec(ctx, `INSERT INTO batchclaim.submission_attempts (seq, service_id, batch_id, instance_id, epoch, reason, from_state, started_at)
		SELECT seq, service_id, batch_id, claimant, claim_epoch, 'first', 'NEW', submitted_at FROM batchclaim.batches WHERE seq = $1`, b.Seq); err != nil {
		t.Fatal(err)
	}
	stored := b
	stored.Attempts = 1
	if err := rec.Adopt(ctx, []batchclaim.Job{{Claim: c, Batch: stored, Reason: "in flight when its owner changed"}}); err != nil {
		t.Fatal(err)
	}
	var n, explainers int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM batchclaim.submission_attempts WHERE seq = $1`, b.Seq).Scan(&n); err != nil || n != 1 {
		t.Fatalf("%d attempt rows (%v), want the one already there", n, err)
	}
	if st, _ := unknownCount(t, pool, b.Seq); st != "UNKNOWN" {
		t.Fatalf("batch %s, want UNKNOWN (adopted)", st)
	}
	expl, err := db.New().DuplicateExplainers(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range expl {
		if e.BatchID == b.BatchID {
			explainers = int(e.Explainers)
		}
	}
	if explainers != 1 {
		t.Fatalf("%d explainers of a duplicate, want 1: the lost POST", explainers)
	}
}

// A status update is fenced on the service_id it names: one that carries the claim of one
// service_id and the batch of another writes nothing.
func TestStatusUpdateForAnotherServiceIDIsRefused(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool, eng, rec, c, _ := recorderSetup(t)
	other, err := ingest.Enqueue(ctx, pool, "other", "o1", []byte("o"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eng.Cycle(ctx); err != nil {
		t.Fatal(err)
	}
	if err := rec.RecordStatuses(ctx, []observer.StatusUpdate{{Claim: c, Seq: other.Seq, BatchID: "o1",
		From: batchclaim.StateNew, Status: batchclaim.StatusCommitted}}); err != nil {
		t.Fatal(err)
	}
	if st, _ := unknownCount(t, pool, other.Seq); st != "NEW" {
		t.Fatalf("batch of another service_id is %s, want NEW (untouched)", st)
	}
}

// With Chain, an outcome that frees its service_id marks the next NEW batch in flight in the
// same write and returns it with its payload; a next batch larger than ChainMaxBytes is left
// for the queuer.
func TestFinishChainsTheNextBatch(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool, _, rec, c, b := recorderSetup(t)
	second, err := ingest.Enqueue(ctx, pool, "svc", "b2", []byte("two"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := rec.Mark(ctx, []batchclaim.Job{{Claim: c, Batch: b, FromState: batchclaim.StateNew, Reason: "first"}})
	if err != nil || len(m) != 1 {
		t.Fatalf("mark: %v, %d", err, len(m))
	}
	next, ok, err := rec.Finish(ctx, batchclaim.Outcome{Job: m[0], Result: batchclaim.Result{Verdict: batchclaim.Done}, Chain: true, ChainMaxBytes: -1})
	if err != nil || !ok {
		t.Fatalf("finish with chain: %v, chained %v", err, ok)
	}
	if next.Batch.Seq != second.Seq || string(next.Batch.Payload) != "two" || next.Claim.Epoch != c.Epoch || next.Batch.Attempts != 0 ||
		next.FromState != batchclaim.StateNew || next.Reason != batchclaim.ReasonFirst {
		t.Fatalf("chained %+v, want b2 (seq %d) with its payload and claim", next, second.Seq)
	}
	var reason, from string
	if err := pool.QueryRow(ctx, `SELECT attempt_reason, attempt_from FROM batchclaim.batches WHERE seq = $1`, second.Seq).Scan(&reason, &from); err != nil ||
		reason != "first" || from != "NEW" {
		t.Fatalf("chained batch's mark keeps reason %q from %q (%v), want first from NEW", reason, from, err)
	}
	if st, _ := unknownCount(t, pool, second.Seq); st != "INFLIGHT" {
		t.Fatalf("chained batch is %s, want INFLIGHT", st)
	}
	third, err := ingest.Enqueue(ctx, pool, "svc", "b3", []byte("three"))
	if err != nil {
		t.Fatal(err)
	}
	_, ok, err = rec.Finish(ctx, batchclaim.Outcome{Job: next, Result: batchclaim.Result{Verdict: batchclaim.Done}, Chain: true, ChainMaxBytes: 4})
	if err != nil || ok {
		t.Fatalf("finish with room for 4 bytes before a 5-byte batch: %v, chained %v; want nothing chained", err, ok)
	}
	if st := state(t, pool, third.Seq); st != "NEW" {
		t.Fatalf("the batch too large to chain is %s, want NEW (left for the queuer)", st)
	}
	var attempts int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM batchclaim.batch_history WHERE to_state = 'COMMITTED' AND detail = 'done'`).Scan(&attempts); err != nil || attempts != 2 {
		t.Fatalf("%d attempts that committed their batch in the history (%v), want 2", attempts, err)
	}
}
