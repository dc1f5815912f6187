package history_test

import (
	"context"
	"slices"
	"testing"

	"github.com/google/uuid"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
	"github.com/batchclaim/batchclaim/testkit/history"
)

// A history written by hand into a real schema with the audit installed: a job revived by a
// Retry that sets its attempt count back and is marked while a later job of its key is
// pending, a revived job that retention then deletes, and a job set COMMITTED with the
// triggers off, so that its row still says unfinished. ReadJobs reads back what the checks
// need, and each check counts its violation.
func TestReadJobs(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.NewPool(t)
	if err := history.InstallAudit(ctx, pool); err != nil {
		t.Fatal(err)
	}
	inst := uuid.New()
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := pool.Exec(ctx, sql, args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	// Times are written, not read from the clock: at(n) is n milliseconds after a fixed instant.
	const at = `('2030-01-01 00:00:00+00'::timestamptz + $2::int * interval '1 millisecond')`
	exec(`INSERT INTO batchclaim.service_id_claims (service_id) VALUES ('s')`)
	exec(`INSERT INTO batchclaim.batches (service_id, batch_id, payload) VALUES ('s', 'a', ''), ('s', 'b', ''), ('t', 'c', '')`)
	seqOf := func(id string) int64 {
		var seq int64
		if err := pool.QueryRow(ctx, `SELECT seq FROM batchclaim.batches WHERE batch_id = $1`, id).Scan(&seq); err != nil {
			t.Fatal(err)
		}
		return seq
	}
	a, b, c := seqOf("a"), seqOf("b"), seqOf("c")
	mark := func(id string, ms int) {
		exec(`UPDATE batchclaim.batches SET state = 'INFLIGHT', attempts = attempts + 1, claimant = $3, claim_epoch = 1,
			submitted_at = `+at+`, attempt_from = state, attempt_reason = 'first' WHERE batch_id = $1`, id, ms, inst)
	}
	outcome := func(id string, to batchclaim.State, ms int) {
		exec(`INSERT INTO batchclaim.submission_attempts (seq, service_id, batch_id, instance_id, epoch, reason, from_state, to_state, started_at, finished_at, outcome)
			SELECT seq, service_id, batch_id, claimant, claim_epoch, attempt_reason, attempt_from, $3, submitted_at, `+at+`, 'x'
			FROM batchclaim.batches WHERE batch_id = $1`, id, ms, string(to))
		exec(`UPDATE batchclaim.batches SET state = $3 WHERE batch_id = $1 AND $2::int >= 0`, id, ms, string(to))
	}
	retry := func(id string, ms int) { // as the release before pos did it: attempts set back
		exec(`INSERT INTO batchclaim.batch_transitions (seq, from_state, to_state, at, detail)
			SELECT seq, state, 'NEW', `+at+`, 'retry' FROM batchclaim.batches WHERE batch_id = $1`, id, ms)
		exec(`UPDATE batchclaim.batches SET state = 'NEW', attempts = 0 WHERE batch_id = $1`, id)
	}
	mark("a", 100)
	outcome("a", "INVALID", 110)
	mark("b", 200)
	outcome("b", "PENDING", 210)
	retry("a", 300)
	mark("a", 310) // b is still PENDING: two in flight, and attempt 1 again
	outcome("a", "INVALID", 320)
	exec(`INSERT INTO batchclaim.batch_transitions (seq, from_state, to_state, at) SELECT seq, 'PENDING', 'COMMITTED', `+at+` FROM batchclaim.batches WHERE batch_id = $1`, "b", 400)
	exec(`UPDATE batchclaim.batches SET state = 'COMMITTED' WHERE batch_id = 'b'`)
	mark("c", 100)
	outcome("c", "INVALID", 110)
	retry("c", 500)
	exec(`DELETE FROM batchclaim.batches WHERE batch_id = 'c'`) // retention, racing the retry
	exec(`INSERT INTO batchclaim.batches (service_id, batch_id, payload) VALUES ('u', 'd', '')`)
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background()) //nolint:errcheck
	if _, err := tx.Exec(ctx, `SET LOCAL session_replication_role = replica`); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `UPDATE batchclaim.batches SET state = 'COMMITTED' WHERE batch_id = 'd'`); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}

	h, err := history.ReadJobs(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	jobs := map[int64]history.Job{}
	for _, j := range h.Jobs {
		jobs[j.Seq] = j
	}
	if len(jobs) != 4 {
		t.Fatalf("jobs read: %+v", h.Jobs)
	}
	if ja := jobs[a]; !slices.Equal(ja.Attempts, []int{1, 1}) || len(ja.Resets) != 1 || len(ja.Changes) != 5 || ja.Final != batchclaim.StateInvalid || !ja.Queued {
		t.Errorf("job a: %+v", ja)
	}
	if jb := jobs[b]; len(jb.Changes) != 3 || jb.Final != batchclaim.StateCommitted {
		t.Errorf("job b: %+v", jb)
	}
	if jc := jobs[c]; jc.Deleted.IsZero() || jc.Final != batchclaim.StateNew || jc.Service != "t" || len(jc.Changes) != 3 {
		t.Errorf("job c (deleted): %+v", jc)
	}
	r := history.CheckJobs(h, []history.Promise{{Kind: history.PromiseRevived, Seq: a}})
	if r.Jobs != 4 || r.Deleted != 1 || r.Retries != 2 || r.DoubleInFlight.Count != 1 || r.Lost.Count != 1 ||
		r.RepeatedAttempts.Count != 1 || r.TerminalRegressions.Count != 0 || r.RowMarks.Count != 1 {
		t.Fatalf("report: %+v", r)
	}
}

// Check judges order and duplicates across what retention deleted (from the audit), takes
// a Retry of an INVALID batch as the reason for its next POST, and counts a CANCELLED batch
// as finished.
func TestCheckAcrossRetentionAndRetries(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.NewPool(t)
	if err := history.InstallAudit(ctx, pool); err != nil {
		t.Fatal(err)
	}
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := pool.Exec(ctx, sql, args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	exec(`INSERT INTO batchclaim.batches (service_id, batch_id, payload, state) VALUES
		('s', 'x1', '', 'COMMITTED'), ('s', 'x2', '', 'COMMITTED'), ('s', 'x3', '', 'INVALID'), ('s', 'x4', '', 'CANCELLED')`)
	exec(`DELETE FROM batchclaim.batches WHERE batch_id = 'x1'`)
	ledger := history.Ledger{Committed: []string{"x2", "x1"}, Effective: map[string]int{"x1": 1, "x2": 1, "x3": 2}}
	r, err := history.Check(ctx, pool, ledger)
	if err != nil {
		t.Fatal(err)
	}
	if r.Batches != 3 || r.Deleted != 1 || r.Cancelled != 1 || r.Lost != 0 || r.OrderViolations != 1 || r.DuplicatePostsUnexplained != 1 {
		t.Fatalf("before the retry: %+v", r)
	}
	exec(`INSERT INTO batchclaim.batch_transitions (seq, from_state, to_state, detail)
		SELECT seq, 'INVALID', 'NEW', 'retry' FROM batchclaim.batches WHERE batch_id = 'x3'`)
	if r, err = history.Check(ctx, pool, ledger); err != nil || r.DuplicatePostsUnexplained != 0 {
		t.Fatalf("after the retry of x3: %+v, %v", r, err)
	}
}

// A stale status write about a batch that retention then deleted is still found: the audit
// keeps the deleted rows and the transactions that wrote them.
func TestCheckWritesAcrossRetention(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.NewPool(t)
	if err := history.InstallAudit(ctx, pool); err != nil {
		t.Fatal(err)
	}
	a, b := uuid.New(), uuid.New()
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := pool.Exec(ctx, sql, args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	// One transaction per event, so commit order is event order.
	exec(`INSERT INTO batchclaim.service_id_claims (service_id, claimant, epoch) VALUES ('s', NULL, 2)`)
	exec(`INSERT INTO batchclaim.claim_events (service_id, instance_id, epoch, event) VALUES ('s', $1, 1, 'acquired')`, a)
	exec(`INSERT INTO batchclaim.batches (service_id, batch_id, payload, state) VALUES ('s', 'g1', '', 'COMMITTED')`)
	exec(`INSERT INTO batchclaim.claim_events (service_id, instance_id, epoch, event) VALUES ('s', $1, 1, 'voided_expired'), ('s', $2, 2, 'acquired')`, a, b)
	exec(`INSERT INTO batchclaim.batch_transitions (seq, from_state, to_state, instance_id, epoch)
	      SELECT seq, 'PENDING', 'COMMITTED', $1, 1 FROM batchclaim.batches WHERE batch_id = 'g1'`, a) // stale
	exec(`INSERT INTO batchclaim.claim_events (service_id, instance_id, epoch, event) VALUES ('s', $1, 2, 'released')`, b)
	exec(`DELETE FROM batchclaim.batches WHERE batch_id = 'g1'`)
	w, err := history.CheckWrites(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	if w.Writes != 1 || w.StaleAccepted != 1 {
		t.Fatalf("writes report: %+v", w)
	}
}
