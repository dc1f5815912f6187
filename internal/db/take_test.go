package db_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/batchclaim/batchclaim/internal/db"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
)

// A head marked by BatchesTakeHeads became the head by a commit its statement saw: its
// predecessor's outcome. The mark must carry a time after that outcome's, or the record
// (batch_history) shows two batches of one service_id in flight at once. A statement's now()
// is its transaction's start, which comes before its snapshot (planning, a lock wait, or, as
// here, earlier statements of its transaction lie in between), so the mark reads the clock
// after its snapshot.
func TestTakeMarksAfterTheCommitItSaw(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url := dbtest.NewDB(t)
	conn := connectWithJobs(t, url, 2) // key-0: job-1000 first, then job-2000
	claimant, nonce := holdClaims(t, conn, "key-0")
	var first, second int64
	if err := conn.QueryRow(ctx, `SELECT
		(SELECT seq FROM batchclaim.batches WHERE batch_id = 'job-1000'),
		(SELECT seq FROM batchclaim.batches WHERE batch_id = 'job-2000')`).Scan(&first, &second); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `UPDATE batchclaim.batches SET state = 'INFLIGHT', claimant = $1, claim_epoch = 1,
		submitted_at = now(), attempts = 1 WHERE seq = $2`, claimant, first); err != nil {
		t.Fatal(err)
	}

	// The taker's transaction begins; then the first job's outcome commits on another
	// connection; then the taker reads the heads and marks the second job.
	taker, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer taker.Close(context.Background())
	tx, err := taker.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(ctx, `SELECT now()`); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	if _, err := conn.Exec(ctx, `UPDATE batchclaim.batches SET state = 'COMMITTED', updated_at = now() WHERE seq = $1`, first); err != nil {
		t.Fatal(err)
	}
	rows, err := db.New().BatchesTakeHeads(ctx, tx, db.BatchesTakeHeadsParams{ServiceIds: []string{"key-0"}, Floors: []int64{0},
		Epochs: []int64{1}, MaxJobs: 1, MaxBytes: 1 << 20, Claimant: claimant, Nonce: nonce})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].Seq != second || !rows[0].Marked {
		t.Fatalf("took %+v, want job-2000 marked", rows)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	var finished, marked time.Time
	if err := conn.QueryRow(ctx, `SELECT (SELECT finished_at FROM batchclaim.batches WHERE seq = $1),
		(SELECT submitted_at FROM batchclaim.batches WHERE seq = $2)`, first, second).Scan(&finished, &marked); err != nil {
		t.Fatal(err)
	}
	if marked.Before(finished) {
		t.Fatalf("job-2000 marked in flight at %s, %s before job-1000 finished (%s)",
			marked.Format(time.RFC3339Nano), finished.Sub(marked), finished.Format(time.RFC3339Nano))
	}
	var inFlight int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM batchclaim.batch_history a JOIN batchclaim.batch_history b
		ON a.seq = $1 AND b.seq = $2 AND a.to_state = 'INFLIGHT' AND b.to_state = 'INFLIGHT'
		WHERE b.at < (SELECT finished_at FROM batchclaim.batches WHERE seq = $1)`, first, second).Scan(&inFlight); err != nil {
		t.Fatal(err)
	}
	if inFlight != 0 {
		t.Fatalf("batch_history shows job-2000 in flight before job-1000 finished")
	}
}
