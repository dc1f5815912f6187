package ui_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batchclaim/batchclaim/ingest"
	"github.com/batchclaim/batchclaim/observer"
	"github.com/batchclaim/batchclaim/pgdb"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
	"github.com/batchclaim/batchclaim/testkit/testutil"
	"github.com/batchclaim/batchclaim/ui"
)

// writeBound is the write timeout these tests give the page, shorter than the real one so that
// they do not wait it out, and long enough that a write with nothing in its way finishes
// within it on a loaded machine (four round trips).
const writeBound = 2 * time.Second

// pageWithWriteBound serves the page on db with writeBound as its write timeout.
func pageWithWriteBound(t *testing.T, db pgdb.DB) *httptest.Server {
	t.Helper()
	h, err := ui.New(db, ui.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ui.SetWriteTimeout(h, writeBound)
	mux := http.NewServeMux()
	h.Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// postWithin posts to path and fails the test if no answer comes within 30s: far beyond the
// write's bound, so a failure means the write hung, not that it was slow.
func postWithin(t *testing.T, srv *httptest.Server, path string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "POST", srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s did not answer: %v", path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// A write of the page (resume, retry, cancel) blocked by a row lock another transaction holds
// answers 503 once its time is up, saying why, instead of waiting for the lock. The server
// gives the statement up too: no statement is left waiting, once the lock is freed nothing has
// changed, and the writes work.
func TestWritesBehindARowLockAnswer503(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.NewPool(t)
	db := dbtest.Open(t, pool, "")
	var seqs []int64
	for i := range 2 {
		st, err := ingest.Enqueue(ctx, pool, "svc-lock", fmt.Sprintf("lock-%d", i), []byte("x"))
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, st.Seq)
	}
	queued, cancelled := seqs[0], seqs[1] // to cancel, and to retry
	if _, err := observer.Cancel(ctx, db, cancelled, "to be retried"); err != nil {
		t.Fatal(err)
	}
	execSQL(t, pool, `INSERT INTO batchclaim.service_halts (service_id, seq, reason) VALUES ('svc-lock', $1, 'test')`, queued)
	srv := pageWithWriteBound(t, db)

	holder, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = holder.Rollback(context.Background()) }()
	if _, err := holder.Exec(ctx, `SELECT 1 FROM batchclaim.batches WHERE seq = ANY($1) FOR UPDATE`, seqs); err != nil {
		t.Fatal(err)
	}
	if _, err := holder.Exec(ctx, `SELECT 1 FROM batchclaim.service_halts WHERE service_id = 'svc-lock' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	writes := []string{
		"/api/halts/svc-lock/resume",
		fmt.Sprintf("/api/batches/%d/retry", cancelled),
		fmt.Sprintf("/api/batches/%d/cancel", queued),
	}
	for _, p := range writes {
		code, body := postWithin(t, srv, p)
		if code != http.StatusServiceUnavailable || !strings.Contains(body, "within "+writeBound.String()+" (another transaction may hold") {
			t.Errorf("POST %s behind a row lock: %d %s, want 503 saying the write ran out of time", p, code, body)
		}
	}
	testutil.WaitFor(t, 10*time.Second, "no statement of the page left waiting for the lock", func() bool {
		return lockWaiters(t, pool) == 0
	})
	if err := holder.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	var states []string
	if err := pool.QueryRow(ctx, `SELECT array_agg(state::text ORDER BY seq) FROM batchclaim.batches WHERE seq = ANY($1)`, seqs).Scan(&states); err != nil {
		t.Fatal(err)
	}
	var halts int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM batchclaim.service_halts WHERE service_id = 'svc-lock'`).Scan(&halts); err != nil {
		t.Fatal(err)
	}
	if strings.Join(states, ",") != "NEW,CANCELLED" || halts != 1 {
		t.Fatalf("after the writes timed out and the lock was freed: states %v, %d halts; want NEW,CANCELLED and the halt", states, halts)
	}
	for _, p := range writes {
		if code, body := postWithin(t, srv, p); code != http.StatusOK {
			t.Errorf("POST %s once the lock is freed: %d %s", p, code, body)
		}
	}
}

// lockWaiters counts the backends of the test's database waiting for a lock.
func lockWaiters(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// A write to a database that stopped answering (every byte dropped, nothing closed) answers
// 503 once its time is up, saying the write may or may not have been made.
func TestWritesToABlackholedDatabaseAnswer503(t *testing.T) {
	t.Parallel()
	proxy, viaProxy := dbtest.Proxied(t, dbtest.NewDB(t))
	pool, err := pgxpool.New(context.Background(), viaProxy)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	srv := pageWithWriteBound(t, dbtest.Open(t, pool, ""))
	if code, body := postWithin(t, srv, "/api/halts/svc-x/resume"); code != http.StatusNotFound {
		t.Fatalf("resume before the outage: %d %s, want 404 (not halted)", code, body)
	}
	proxy.Blackhole()
	for _, p := range []string{"/api/halts/svc-x/resume", "/api/batches/1/retry", "/api/batches/1/cancel"} {
		code, body := postWithin(t, srv, p)
		if code != http.StatusServiceUnavailable || !strings.Contains(body, "within "+writeBound.String()+" (another transaction may hold") ||
			!strings.Contains(body, "reload to see whether") {
			t.Errorf("POST %s to a black-holed database: %d %s, want 503 saying the write ran out of time", p, code, body)
		}
	}
	proxy.Restore()
}
