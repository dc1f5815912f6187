package observer_test

import (
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/claims"
	"github.com/batchclaim/batchclaim/ingest"
	"github.com/batchclaim/batchclaim/observer"
	"github.com/batchclaim/batchclaim/pgdb"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
)

// recorderSetup returns a registered engine holding "svc" (lock timeout R = 100ms), its
// recorder, and one stored batch of svc.
func recorderSetup(t *testing.T) (*pgxpool.Pool, *claims.Engine, *observer.Recorder, claims.Claim, batchclaim.Batch) {
	t.Helper()
	ctx := t.Context()
	pool := dbtest.NewPool(t)
	s, err := ingest.Enqueue(ctx, pool, "svc", "b1", []byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	eng, err := claims.New(dbtest.Open(t, pool, ""), claims.Config{Name: "rec", RenewInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Register(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := eng.Cycle(ctx); err != nil {
		t.Fatal(err)
	}
	c, ok := eng.Holds("svc")
	if !ok {
		t.Fatal("engine does not hold svc")
	}
	return pool, eng, mustRecorder(t, pool, eng, observer.RecorderConfig{}), c,
		batchclaim.Batch{Seq: s.Seq, ServiceID: "svc", BatchID: "b1", Payload: []byte("x")}
}

// mustRecorder is observer.NewRecorder for a test.
func mustRecorder(t testing.TB, pool *pgxpool.Pool, fence observer.Fencer, cfg observer.RecorderConfig) *observer.Recorder {
	t.Helper()
	rec, err := observer.NewRecorder(dbtest.Open(t, pool, ""), fence, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

func unknownCount(t *testing.T, pool *pgxpool.Pool, seq int64) (state string, n int) {
	t.Helper()
	if err := pool.QueryRow(t.Context(), `SELECT state, unknown_count FROM batchclaim.batches WHERE seq = $1`, seq).Scan(&state, &n); err != nil {
		t.Fatal(err)
	}
	return state, n
}

// Only answers about the latest POST count towards a resubmission: a POST starts the count
// afresh, and adopting an orphaned in-flight batch is no answer. Otherwise a batch
// resubmitted once and then orphaned would be resubmitted at once by its next owner.
func TestUnknownCountRestartsAtEachPostAndAdoptionIsNoAnswer(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool, _, rec, c, b := recorderSetup(t)
	if _, err := pool.Exec(ctx, `UPDATE batchclaim.batches SET state = 'UNKNOWN', unknown_count = 3 WHERE seq = $1`, b.Seq); err != nil {
		t.Fatal(err)
	}
	// Resubmitted after three UNKNOWN answers...
	if m, err := rec.Mark(ctx, []batchclaim.Job{{Claim: c, Batch: b, FromState: batchclaim.StateUnknown, Reason: "resubmit"}}); err != nil || len(m) != 1 {
		t.Fatalf("mark: %v, %d marked", err, len(m))
	}
	if st, n := unknownCount(t, pool, b.Seq); st != "INFLIGHT" || n != 0 {
		t.Fatalf("after the POST's mark: %s with %d UNKNOWN answers, want INFLIGHT with 0", st, n)
	}
	// ...and orphaned: the next owner adopts it. That is no answer from the ledger.
	posted := b
	posted.Attempts = 1 // as stored after the mark
	if err := rec.Adopt(ctx, []batchclaim.Job{{Claim: c, Batch: posted, Reason: "in flight when its owner changed"}}); err != nil {
		t.Fatal(err)
	}
	if st, n := unknownCount(t, pool, b.Seq); st != "UNKNOWN" || n != 0 {
		t.Fatalf("after adoption: %s with %d UNKNOWN answers, want UNKNOWN with 0", st, n)
	}
	// A real answer counts.
	if err := rec.RecordStatuses(ctx, []observer.StatusUpdate{{Claim: c, Seq: b.Seq, BatchID: b.BatchID, Attempt: 1,
		From: batchclaim.StateUnknown, Status: batchclaim.StatusUnknown}}); err != nil {
		t.Fatal(err)
	}
	if st, n := unknownCount(t, pool, b.Seq); st != "UNKNOWN" || n != 1 {
		t.Fatalf("after one UNKNOWN answer: %s with %d, want UNKNOWN with 1", st, n)
	}
}

// A recording statement that waits on a lock longer than lock_timeout (R, set on every
// connection by claims.ConfigurePool) is run again rather than given up: a lost outcome
// write would turn into an adoption and a resubmission.
func TestRecordingRetriesLockTimeouts(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool, eng, _, c, b := recorderSetup(t)
	pc := pool.Config()
	claims.ConfigurePool(pc, eng.Timings())
	guarded, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		t.Fatal(err)
	}
	defer guarded.Close()
	rec := mustRecorder(t, guarded, eng, observer.RecorderConfig{})
	marked, err := rec.Mark(ctx, []batchclaim.Job{{Claim: c, Batch: b, FromState: batchclaim.StateNew, Reason: "first"}})
	if err != nil || len(marked) != 1 {
		t.Fatalf("mark: %v, %d marked", err, len(marked))
	}
	// Another transaction holds the claim row for five lock timeouts.
	blocker, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := blocker.Exec(ctx, `SELECT 1 FROM batchclaim.service_id_claims WHERE service_id = 'svc' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	released := make(chan struct{})
	go func() {
		time.Sleep(500 * time.Millisecond) // provokes lock timeouts; not a wait for state
		_ = blocker.Commit(ctx)
		close(released)
	}()
	before := eng.Stats().WriteRetries
	_, _, err = rec.Finish(ctx, batchclaim.Outcome{Job: marked[0], Result: batchclaim.Result{Verdict: batchclaim.Accepted, HTTPStatus: 202},
		Latency: time.Millisecond})
	<-released
	if err != nil {
		t.Fatalf("outcome not recorded: %v", err)
	}
	if st, _ := unknownCount(t, pool, b.Seq); st != "PENDING" {
		t.Fatalf("state %s, want PENDING", st)
	}
	if eng.Stats().WriteRetries == before {
		t.Fatal("the recording did not have to be retried: the test did not provoke a lock timeout")
	}
}

// The recorder and the poller need a DB made by pgdb.Open.
func TestConstructorsRefuseTheZeroDB(t *testing.T) {
	t.Parallel()
	if _, err := observer.NewRecorder(pgdb.DB{}, nil, observer.RecorderConfig{}); err == nil || !strings.Contains(err.Error(), "pgdb.Open") {
		t.Errorf("NewRecorder(zero DB) = %v, want an error saying to use pgdb.Open", err)
	}
	if _, err := observer.NewPoller(pgdb.DB{}, nil, nil, nil, observer.PollerConfig{}); err == nil || !strings.Contains(err.Error(), "pgdb.Open") {
		t.Errorf("NewPoller(zero DB) = %v, want an error saying to use pgdb.Open", err)
	}
}
