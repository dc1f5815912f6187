package ingest_test

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batchclaim/batchclaim/dlt"
	"github.com/batchclaim/batchclaim/ingest"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
	"github.com/batchclaim/batchclaim/testkit/testutil"
)

// Two transactions enqueue for one service_id; the one that stored first commits last (an
// embedding service's long transaction). The per-service order (seq) must be the commit
// order: the second enqueue waits for the first transaction instead of drawing a seq that a
// slower transaction can jump.
func TestEnqueueOrderIsCommitOrder(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.NewPool(t)
	// The service_id is known already (its claim row exists), as in steady operation.
	if _, err := ingest.Enqueue(ctx, pool, "svc", "earlier", []byte("0")); err != nil {
		t.Fatal(err)
	}

	slow, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Rollback(ctx) //nolint:errcheck
	first, err := ingest.Enqueue(ctx, slow, "svc", "stored-first", []byte("1"))
	if err != nil {
		t.Fatal(err)
	}

	type result struct {
		stored ingest.Stored
		err    error
		at     time.Time
	}
	done := make(chan result, 1)
	go func() {
		s, err := ingest.Enqueue(ctx, pool, "svc", "stored-second", []byte("2")) // its own commit
		done <- result{s, err, time.Now()}
	}()
	// Wait until the second enqueue has either committed or is waiting on a lock.
	var second *result
	testutil.WaitFor(t, 10*time.Second, "the second enqueue committing or waiting on a lock", func() bool {
		select {
		case r := <-done:
			second = &r
			return true
		default:
		}
		var waiting bool
		_ = pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND state = 'active')`).Scan(&waiting)
		return waiting
	})
	slowCommitted := time.Now()
	if err := slow.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if second == nil {
		r := <-done
		second = &r
	}
	if second.err != nil {
		t.Fatal(second.err)
	}
	if second.at.Before(slowCommitted) {
		t.Fatalf("the second enqueue committed (seq %d) while the transaction holding seq %d was still open: "+
			"seq order is not commit order", second.stored.Seq, first.Seq)
	}
	if second.stored.Seq <= first.Seq {
		t.Fatalf("seq of the batch committed second = %d, not after %d", second.stored.Seq, first.Seq)
	}
}

// A ledger batch id is global: the same batch under a second service_id is refused and
// nothing is stored, through the library and through the API (409 in the Sawtooth shape).
// Opaque job ids stay per service_id.
func TestLedgerBatchIDIsGlobal(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	srv, pool := setup(t)
	id, list := dlt.FakeBatch("x", 1)

	if _, err := ingest.EnqueueBatchList(ctx, pool, "a", list); err != nil {
		t.Fatal(err)
	}
	again, err := ingest.EnqueueBatchList(ctx, pool, "a", list)
	if err != nil || len(again) != 1 || again[0].New {
		t.Fatalf("storing the same batch under the same service_id again: %+v, %v; want an idempotent repeat", again, err)
	}
	_, err = ingest.EnqueueBatchList(ctx, pool, "b", list)
	if !errors.Is(err, ingest.ErrBatchIDTaken) {
		t.Fatalf("same ledger batch under another service_id: err = %v, want ErrBatchIDTaken", err)
	}
	code, body := post(t, srv.URL+"/batches?service_id=c", "application/octet-stream", list)
	if code != http.StatusConflict {
		t.Fatalf("POST under a third service_id: status %d, body %v; want 409", code, body)
	}
	if e, _ := body["error"].(map[string]any); e == nil || e["code"] == nil || e["message"] == nil {
		t.Fatalf("409 body not in the Sawtooth error shape: %v", body)
	}
	assertRows(t, pool, "SELECT count(*) FROM batchclaim.batches WHERE batch_id = $1", id, 1)
	assertRows(t, pool, "SELECT count(*) FROM batchclaim.service_id_claims WHERE service_id = 'c'", nil, 0)

	// Opaque job ids of a job runner are per key.
	for _, key := range []string{"k1", "k2"} {
		if s, err := ingest.Enqueue(ctx, pool, key, "job-1", []byte("x")); err != nil || !s.New {
			t.Fatalf("opaque id under %s: %+v, %v", key, s, err)
		}
	}
}

// Given a pool, a list that fails stores nothing of the batches it holds, not only nothing
// of the one that failed: the new batch before a refused one is not left stored for a caller
// who was told the call failed and sends the list again.
func TestRefusedListStoresNothingThroughAPool(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	_, pool := setup(t)
	taken, takenList := dlt.FakeBatch("x", 1)
	if _, err := ingest.EnqueueBatchList(ctx, pool, "a", takenList); err != nil {
		t.Fatal(err)
	}
	fresh, freshList := dlt.FakeBatch("x", 2)
	_, err := ingest.EnqueueBatchList(ctx, pool, "b", append(freshList, takenList...))
	if !errors.Is(err, ingest.ErrBatchIDTaken) {
		t.Fatalf("a list with a batch stored under another service_id: err = %v, want ErrBatchIDTaken", err)
	}
	assertRows(t, pool, "SELECT count(*) FROM batchclaim.batches WHERE batch_id = $1", fresh, 0)
	assertRows(t, pool, "SELECT count(*) FROM batchclaim.batches WHERE batch_id = $1", taken, 1)
	assertRows(t, pool, "SELECT count(*) FROM batchclaim.service_id_claims WHERE service_id = 'b'", nil, 0)
}

func assertRows(t *testing.T, pool *pgxpool.Pool, sql string, arg any, want int) {
	t.Helper()
	var n int
	var err error
	if arg == nil {
		err = pool.QueryRow(t.Context(), sql).Scan(&n)
	} else {
		err = pool.QueryRow(t.Context(), sql, arg).Scan(&n)
	}
	if err != nil {
		t.Fatal(err)
	}
	if n != want {
		t.Fatalf("%s: %d rows, want %d", sql, n, want)
	}
}

// Given a pool in another schema, EnqueueMany's transaction runs there: the jobs are stored in
// that schema's tables and the call reports them.
func TestEnqueueManyThroughAPoolInASchema(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool, err := pgxpool.New(ctx, dbtest.NewDBInSchema(t, "tenant_3"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	db := dbtest.Open(t, pool, "tenant_3")
	stored, err := ingest.EnqueueMany(ctx, db, []ingest.Job{{ServiceID: "k", BatchID: "j1"}, {ServiceID: "k"}})
	if err != nil || len(stored) != 2 || !stored[0].New || !stored[1].New {
		t.Fatalf("EnqueueMany in schema tenant_3: %+v, %v", stored, err)
	}
	again, err := ingest.EnqueueMany(ctx, db, []ingest.Job{{ServiceID: "k", BatchID: "j1"}})
	if err != nil || len(again) != 1 || again[0].New || again[0].Seq != stored[0].Seq {
		t.Fatalf("the repeat in schema tenant_3: %+v, %v; want the first job's seq, not new", again, err)
	}
	assertRows(t, pool, "SELECT count(*) FROM tenant_3.batches", nil, 2)
}
