package db_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/batchclaim/batchclaim/internal/db"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
)

// unfinished is a plain column since migration 21: each statement that moves a batch into or
// out of a terminal state sets it, as it sets finished_at, and the trigger batches_finished_at
// keeps it right for every other writer. The statements must leave the trigger nothing to do
// (its PL/pgSQL call per row is what setting the column saves), and every row must agree with
// its state. Each write below is one the data path, an operator or an application makes.
func TestWritesKeepUnfinishedWithoutTheTrigger(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	conn := connectWithJobs(t, dbtest.NewDB(t), 2)
	claimant, nonce := holdClaims(t, conn, "%")
	q := db.New()
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background()) //nolint:errcheck
	if _, err := tx.Exec(ctx, `SET LOCAL track_functions = 'pl'`); err != nil {
		t.Fatal(err)
	}
	// The heads of key-0 to key-6 in flight at attempt 1; key-3's run has a cancel requested.
	heads := map[string]int64{}
	rows, err := tx.Query(ctx, `UPDATE batchclaim.batches SET state = 'INFLIGHT', claimant = $1, claim_epoch = 1, attempts = 1,
			submitted_at = now(), attempt_reason = 'first', attempt_from = 'NEW', cancel_attempt = CASE WHEN service_id = 'key-3' THEN 1 END
		WHERE seq IN (SELECT min(seq) FROM batchclaim.batches WHERE service_id IN ('key-0', 'key-1', 'key-2', 'key-3', 'key-4', 'key-5', 'key-6')
			GROUP BY service_id) RETURNING service_id, seq`, claimant)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var svc string
		var seq int64
		if err := rows.Scan(&svc, &seq); err != nil {
			t.Fatal(err)
		}
		heads[svc] = seq
	}
	if rows.Close(); rows.Err() != nil || len(heads) != 7 {
		t.Fatalf("heads %v: %v", heads, rows.Err())
	}
	calls := func() (n int64) {
		t.Helper()
		if err := tx.QueryRow(ctx, `SELECT COALESCE(pg_stat_get_xact_function_calls('batchclaim.batchclaim_finished_at()'::regprocedure), 0)`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	// A success, chaining key-0's next job.
	if _, err := q.BatchesRecordCommits(ctx, tx, db.BatchesRecordCommitsParams{Seqs: []int64{heads["key-0"]}, ServiceIds: []string{"key-0"},
		Epochs: []int64{1}, Attempts: []int32{1}, RetryAfterMs: []int64{0}, HttpStatuses: []int32{200}, LatenciesMs: []float64{1},
		Chain: []bool{true}, ChainMaxBytes: []int64{-1}, Outputs: []string{""}, Claimant: claimant, Nonce: nonce}); err != nil {
		t.Fatal(err)
	}
	// Each other outcome: given up, INVALID, DELAYED under a cancel (CANCELLED), retried later,
	// accepted by a ledger, done.
	out := db.BatchesRecordOutcomesParams{Claimant: claimant, Nonce: nonce, TrackIdle: true}
	for _, o := range []struct{ svc, state, dlt, outcome string }{
		{"key-1", "DISCARDED", "", "discard"}, {"key-2", "INVALID", "INVALID", "rejected"}, {"key-3", "DELAYED", "", "retry"},
		{"key-4", "DELAYED", "", "retry"}, {"key-5", "PENDING", "PENDING", "accepted"}, {"key-6", "COMMITTED", "COMMITTED", "done"},
	} {
		out.Seqs, out.ServiceIds = append(out.Seqs, heads[o.svc]), append(out.ServiceIds, o.svc)
		out.Epochs, out.Attempts, out.RetryAfterMs = append(out.Epochs, 1), append(out.Attempts, 1), append(out.RetryAfterMs, 0)
		out.NewStates, out.DltStatuses, out.Outcomes = append(out.NewStates, o.state), append(out.DltStatuses, o.dlt), append(out.Outcomes, o.outcome)
		out.LastErrors, out.InvalidDetails = append(out.LastErrors, ""), append(out.InvalidDetails, "")
		out.HttpStatuses, out.LatenciesMs = append(out.HttpStatuses, 200), append(out.LatenciesMs, 1)
		out.Chain, out.ChainMaxBytes, out.Outputs = append(out.Chain, true), append(out.ChainMaxBytes, -1), append(out.Outputs, "")
	}
	recorded, err := q.BatchesRecordOutcomes(ctx, tx, out)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recorded {
		if !r.Recorded {
			t.Fatalf("outcome of %d not recorded: %+v", r.Seq, r)
		}
	}
	// The ledger's answer for the accepted one: COMMITTED.
	if _, err := q.BatchesRecordStatuses(ctx, tx, db.BatchesRecordStatusesParams{Seqs: []int64{heads["key-5"]}, ServiceIds: []string{"key-5"},
		Epochs: []int64{1}, Attempts: []int32{1}, FromStates: []string{"PENDING"}, NewStates: []string{"COMMITTED"},
		DltStatuses: []string{"COMMITTED"}, Answers: []bool{true}, InvalidDetails: []string{""}, Details: []string{""},
		Claimant: claimant, Nonce: nonce, TrackIdle: true}); err != nil {
		t.Fatal(err)
	}
	// An operator's cancel of a waiting job and retry of a finished one.
	var waiting int64
	if err := tx.QueryRow(ctx, `SELECT max(seq) FROM batchclaim.batches WHERE service_id = 'key-9'`).Scan(&waiting); err != nil {
		t.Fatal(err)
	}
	if c, err := q.BatchCancel(ctx, tx, db.BatchCancelParams{Seq: waiting, Detail: "test"}); err != nil || c.ToState != "CANCELLED" {
		t.Fatalf("cancel: %+v, %v", c, err)
	}
	if r, err := q.BatchRetry(ctx, tx, heads["key-1"]); err != nil || r.ToState != "NEW" {
		t.Fatalf("retry: %+v, %v", r, err)
	}
	if n := calls(); n != 0 {
		t.Errorf("batches_finished_at ran %d times for the statements' own writes", n)
	}
	var states []string
	if err := tx.QueryRow(ctx, `SELECT array_agg(service_id || ' ' || state ORDER BY service_id) FROM batchclaim.batches
		WHERE seq = ANY($1)`, []int64{heads["key-1"], heads["key-2"], heads["key-3"], heads["key-4"], heads["key-6"], waiting}).Scan(&states); err != nil {
		t.Fatal(err)
	}
	if want := "[key-1 NEW key-2 INVALID key-3 CANCELLED key-4 DELAYED key-6 COMMITTED key-9 CANCELLED]"; fmt.Sprint(states) != want {
		t.Errorf("states %v, want %s", states, want)
	}

	// What the previous release's data path writes: finished_at without unfinished. The
	// trigger runs, once per such row, and sets it.
	if _, err := tx.Exec(ctx, `UPDATE batchclaim.batches SET state = 'COMMITTED', finished_at = now() WHERE seq = $1`, heads["key-4"]); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `UPDATE batchclaim.batches SET state = 'NEW', finished_at = NULL WHERE seq = $1`, heads["key-6"]); err != nil {
		t.Fatal(err)
	}
	if n := calls(); n != 2 {
		t.Errorf("batches_finished_at ran %d times for two writes that left unfinished behind, want 2", n)
	}
	assertUnfinishedFollowsState(t, tx)
}

// assertUnfinishedFollowsState fails t if a batch's unfinished or finished_at disagrees with
// its state.
func assertUnfinishedFollowsState(t *testing.T, tx pgx.Tx) {
	t.Helper()
	var bad []string
	if err := tx.QueryRow(t.Context(), `SELECT COALESCE(array_agg(seq || ' ' || state || ' unfinished ' || unfinished || ' finished_at ' || COALESCE(finished_at::text, 'NULL')), '{}')
		FROM batchclaim.batches
		WHERE unfinished <> (state NOT IN ('COMMITTED', 'INVALID', 'DISCARDED', 'CANCELLED')) OR unfinished <> (finished_at IS NULL)`).Scan(&bad); err != nil {
		t.Fatal(err)
	}
	if len(bad) > 0 {
		t.Errorf("rows whose unfinished or finished_at disagrees with their state: %v", bad)
	}
}
