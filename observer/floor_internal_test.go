package observer

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/ingest"
	"github.com/batchclaim/batchclaim/internal/db"
	"github.com/batchclaim/batchclaim/pgdb"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
)

// capture keeps the statement it is given instead of running it.
type capture struct {
	pgdb.Querier
	sql  string
	args []any
}

var errCaptured = errors.New("captured, not run")

func (c *capture) Query(_ context.Context, sql string, args ...any) (pgx.Rows, error) {
	c.sql, c.args = sql, args
	return nil, errCaptured
}

// blocksFetched runs sql in a transaction it rolls back and returns the blocks of
// batchclaim's tables and indexes the statement fetched.
func blocksFetched(t *testing.T, pool *pgxpool.Pool, sql string, args []any) int64 {
	t.Helper()
	ctx := t.Context()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck
	const fetched = `SELECT sum(pg_stat_get_xact_blocks_fetched(c.oid))::bigint FROM pg_class c WHERE c.relnamespace = 'batchclaim'::regnamespace`
	var before, after int64
	if err := tx.QueryRow(ctx, fetched).Scan(&before); err != nil {
		t.Fatal(err)
	}
	rows, err := tx.Query(ctx, sql, args...)
	if err != nil {
		t.Fatal(err)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if err := tx.QueryRow(ctx, fetched).Scan(&after); err != nil {
		t.Fatal(err)
	}
	return after - before
}

// An outcome's write looks for the key's next head, and whether the key is now idle, past the
// batch it finished: the entries of the batches that finished before it, which vacuum cannot
// remove while an older snapshot is held, are not read. Both statements that write outcomes
// are measured against themselves with the floor taken out.
func TestOutcomeLooksForTheNextHeadPastTheFinishedOne(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.NewPool(t)
	const n = 200
	seqs := make([]int64, n)
	for i := range n {
		s, err := ingest.Enqueue(ctx, pool, "svc", fmt.Sprintf("b%03d", i), []byte("x"))
		if err != nil {
			t.Fatal(err)
		}
		seqs[i] = s.Seq
	}
	dbtest.HoldSnapshot(t, pool)
	for _, s := range seqs[:n-1] { // finished one write at a time, as workers would
		for _, st := range []string{"INFLIGHT", "COMMITTED"} {
			if _, err := pool.Exec(ctx, "UPDATE batchclaim.batches SET state = $2 WHERE seq = $1", s, st); err != nil {
				t.Fatal(err)
			}
		}
	}
	eng := claimAll(t, pool)
	rec, err := NewRecorder(dbtest.Open(t, pool, ""), eng, RecorderConfig{})
	if err != nil {
		t.Fatal(err)
	}
	c, _ := eng.Holds("svc")
	marked, err := rec.Mark(ctx, []batchclaim.Job{{Claim: c, FromState: batchclaim.StateNew, Reason: batchclaim.ReasonFirst,
		Batch: batchclaim.Batch{Seq: seqs[n-1], ServiceID: "svc", BatchID: fmt.Sprintf("b%03d", n-1)}}})
	if err != nil || len(marked) != 1 {
		t.Fatalf("marked %d: %v", len(marked), err)
	}
	p := db.BatchesRecordOutcomesParams{Claimant: eng.InstanceID(), Nonce: eng.Nonce(),
		Seqs: []int64{seqs[n-1]}, ServiceIds: []string{"svc"}, Epochs: []int64{c.Epoch}, Attempts: []int32{int32(marked[0].Batch.Attempts + 1)},
		NewStates: []string{string(batchclaim.Done.State())}, DltStatuses: []string{string(batchclaim.Done.Status())},
		RetryAfterMs: []int64{0}, LastErrors: []string{""}, InvalidDetails: []string{""}, HttpStatuses: []int32{200},
		LatenciesMs: []float64{1}, Outcomes: []string{batchclaim.Done.String()}, Chain: []bool{true}, ChainMaxBytes: []int64{-1},
		Outputs: []string{""}, TrackIdle: true}
	var outcomes, commits capture
	if _, err := rec.q.BatchesRecordOutcomes(ctx, &outcomes, p); !errors.Is(err, errCaptured) {
		t.Fatalf("BatchesRecordOutcomes: %v", err)
	}
	rec.db = &commits
	if _, err := rec.q.BatchesRecordCommits(ctx, rec.db, commitsParams(p)); !errors.Is(err, errCaptured) {
		t.Fatalf("BatchesRecordCommits: %v", err)
	}
	for _, st := range []struct {
		name, floor string
		c           capture
	}{{"BatchesRecordOutcomes", "ELSE r.pos END AS floor", outcomes}, {"BatchesRecordCommits", "ELSE b.pos END AS floor", commits}} {
		if !strings.Contains(st.c.sql, st.floor) {
			t.Fatalf("%s: no %q to take out", st.name, st.floor)
		}
		got := blocksFetched(t, pool, st.c.sql, st.c.args)
		without := blocksFetched(t, pool, strings.Replace(st.c.sql, st.floor, "ELSE 0 END AS floor", 1), st.c.args)
		t.Logf("%s: %d blocks fetched; %d without the floor", st.name, got, without)
		if without < n || got > without/4 {
			t.Errorf("%s fetched %d blocks with %d finished batches before the one it finished (%d with its probes from the key's start)", st.name, got, n-1, without)
		}
	}
}
