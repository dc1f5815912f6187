package ingest

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batchclaim/batchclaim/testkit/dbtest"
)

// statementSizes records, for each BatchesInsertMany a pool runs, the bytes of ids and
// payloads it carries.
type statementSizes struct {
	mu    sync.Mutex
	sizes []int
}

func (s *statementSizes) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if !strings.Contains(d.SQL, "BatchesInsertMany") {
		return ctx
	}
	n := 0
	for _, a := range d.Args {
		switch v := a.(type) {
		case []string:
			for _, x := range v {
				n += len(x)
			}
		case [][]byte:
			for _, x := range v {
				n += len(x)
			}
		}
	}
	s.mu.Lock()
	s.sizes = append(s.sizes, n)
	s.mu.Unlock()
	return ctx
}

func (*statementSizes) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// A POST /batches of tens of thousands of small batches is stored in statements of at most
// maxStatementBytes of ids and payloads, so that what the driver holds does not grow with
// the list; the list is still stored whole and in order, and sent again it is a repeat.
func TestStoreStatementsBounded(t *testing.T) {
	t.Parallel()
	cfg, err := pgxpool.ParseConfig(dbtest.NewDB(t))
	if err != nil {
		t.Fatal(err)
	}
	sizes := &statementSizes{}
	cfg.ConnConfig.Tracer = sizes
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	h, err := NewHandler(dbtest.Open(t, pool, ""), Config{MaxBody: 4 << 20, MaxMemory: 32 << 20})
	if err != nil {
		t.Fatal(err)
	}
	const n = 20000 // 2.7 MB of body, 5.2 MB of ids and payloads
	list := smallestBatches(n)
	post := func() string {
		r := httptest.NewRequest("POST", "/batches?service_id=svc-big", bytes.NewReader(list))
		r.Header.Set("Content-Type", "application/octet-stream")
		w := httptest.NewRecorder()
		h.postBatches(w, r)
		if w.Code != http.StatusAccepted {
			t.Fatalf("POST: %d %s", w.Code, w.Body)
		}
		return w.Body.String()
	}
	first := post()
	sizes.mu.Lock()
	got := append([]int(nil), sizes.sizes...)
	sizes.mu.Unlock()
	total := 0
	for _, s := range got {
		total += s
		if s > maxStatementBytes {
			t.Errorf("a statement carried %d bytes of ids and payloads, over %d", s, maxStatementBytes)
		}
	}
	if len(got) < 5 || total < n*(2*128) {
		t.Fatalf("%d statements carried %d bytes; want the list's ids and payloads in several", len(got), total)
	}
	var bad int
	if err := pool.QueryRow(t.Context(), `
		SELECT count(*) FILTER (WHERE rn <> ord) FROM (
			SELECT row_number() OVER (ORDER BY seq) AS rn, ('x' || right(batch_id, 15))::bit(60)::bigint + 1 AS ord
			FROM batchclaim.batches WHERE service_id = 'svc-big') r`).Scan(&bad); err != nil || bad != 0 {
		t.Fatalf("%d batches out of the list's order, %v", bad, err)
	}
	var stored int
	if err := pool.QueryRow(t.Context(), `SELECT count(*) FROM batchclaim.batches WHERE service_id = 'svc-big'`).Scan(&stored); err != nil || stored != n {
		t.Fatalf("%d batches stored, %v; want %d", stored, err, n)
	}
	if again := post(); again != first {
		t.Fatalf("the repeat's answer differs from the first's")
	}
	if err := pool.QueryRow(t.Context(), `SELECT count(*) FROM batchclaim.batches WHERE service_id = 'svc-big'`).Scan(&stored); err != nil || stored != n {
		t.Fatalf("%d batches stored after the repeat, %v; want %d", stored, err, n)
	}
}
