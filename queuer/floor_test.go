package queuer_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batchclaim/batchclaim/ingest"
	"github.com/batchclaim/batchclaim/queuer"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
)

// headsTracer counts the BatchesTakeHeads statements a pool ran and keeps the text and
// arguments of the last.
type headsTracer struct {
	mu   sync.Mutex
	n    int
	sql  string
	args []any
}

func (h *headsTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if strings.HasPrefix(d.SQL, "-- name: BatchesTakeHeads ") {
		h.mu.Lock()
		h.n++
		h.sql, h.args = d.SQL, d.Args
		h.mu.Unlock()
	}
	return ctx
}

// count is how many BatchesTakeHeads statements the pool ran.
func (h *headsTracer) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n
}

// tracedPool returns a pool on a new database whose statements tracer sees.
func tracedPool(t *testing.T) (*pgxpool.Pool, *headsTracer) {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dbtest.NewDB(t))
	if err != nil {
		t.Fatal(err)
	}
	tracer := &headsTracer{}
	cfg.ConnConfig.Tracer = tracer
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool, tracer
}

func (h *headsTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// buffers runs the last BatchesTakeHeads statement again under EXPLAIN (ANALYZE, BUFFERS) and
// returns the shared buffers it read.
func (h *headsTracer) buffers(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	h.mu.Lock()
	sql, args := h.sql, h.args
	h.mu.Unlock()
	if sql == "" {
		t.Fatal("no BatchesTakeHeads statement ran")
	}
	var plan []struct {
		Plan struct {
			Hit  int `json:"Shared Hit Blocks"`
			Read int `json:"Shared Read Blocks"`
		} `json:"Plan"`
	}
	var out []byte
	if err := pool.QueryRow(t.Context(), "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) "+sql, args...).Scan(&out); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(out, &plan); err != nil || len(plan) != 1 {
		t.Fatalf("plan %s: %v", out, err)
	}
	return plan[0].Plan.Hit + plan[0].Plan.Read
}

// A fetch starts its probe of a service_id's queue at the last head it read there. While a
// snapshot older than the finished batches is held open, their entries stay in the index and
// a probe from the start reads each; from the floor it reads a few pages however many
// finished. The head it finds is the true head, also after a finished batch before the
// floor is retried (a retried batch goes to the back).
func TestFetchStartsAtTheLastHead(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool, tracer := tracedPool(t)
	const n = 200
	seqs := make([]int64, n)
	for i := range n {
		s, err := ingest.Enqueue(ctx, pool, "svc", fmt.Sprintf("b%03d", i), []byte("x"))
		if err != nil {
			t.Fatal(err)
		}
		seqs[i] = s.Seq
	}
	dbtest.HoldSnapshot(t, pool) // a report's snapshot, held while everything below happens

	eng := engine(t, pool)
	d := &dispatcher{free: 1}
	q, err := queuer.New(dbtest.Open(t, pool, ""), eng, d, newRecorder(t, pool, eng), queuer.Config{Interval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	fetch := func(want int64) {
		t.Helper()
		d.got = nil
		q.Dirty("svc")
		if _, err := q.Fetch(ctx); err != nil {
			t.Fatal(err)
		}
		if len(d.got) != 1 || d.got[0].Batch.Seq != want {
			t.Fatalf("handed out %v, want seq %d", d.got, want)
		}
		q.Done(d.got[0])
	}
	fetch(seqs[0])
	first := tracer.buffers(t, pool)
	// The batches before the last one finish, one write at a time, as workers would.
	for _, s := range seqs[:n-1] {
		exec(t, pool, "UPDATE batchclaim.batches SET state = 'INFLIGHT' WHERE seq = $1", s)
		exec(t, pool, "UPDATE batchclaim.batches SET state = 'COMMITTED' WHERE seq = $1", s)
	}
	// The one before the last is discarded and retried (BatchRetry's move: a new place at
	// the back, under the enqueue's lock).
	exec(t, pool, "UPDATE batchclaim.batches SET state = 'DISCARDED' WHERE seq = $1", seqs[n-2])
	exec(t, pool, `UPDATE batchclaim.batches SET state = 'NEW', pos = nextval('batchclaim.batches_pos_seq') WHERE seq = $1`, seqs[n-2])
	fetch(seqs[n-1]) // from the floor the first fetch left: the last stored, then the retried one
	exec(t, pool, "UPDATE batchclaim.batches SET state = 'COMMITTED' WHERE seq = $1", seqs[n-1])
	fetch(seqs[n-2])
	again := tracer.buffers(t, pool)
	if again > first+10 {
		t.Fatalf("a probe from the floor read %d buffers with %d finished batches behind it (the first probe: %d)", again, n-1, first)
	}
}
