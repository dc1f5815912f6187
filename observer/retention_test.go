package observer_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batchclaim/batchclaim/ingest"
	"github.com/batchclaim/batchclaim/observer"
	"github.com/batchclaim/batchclaim/pgdb"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
)

// storeAged stores a batch in state, with one attempt and one transition, finished (last
// written) age before the database's now, and returns its seq.
func storeAged(t *testing.T, pool *pgxpool.Pool, svc, id, state string, age time.Duration) int64 {
	t.Helper()
	ctx := t.Context()
	s, err := ingest.Enqueue(ctx, pool, svc, id, []byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `
		WITH b AS (
		    UPDATE batchclaim.batches SET state = $2, updated_at = now() - $3::bigint * interval '1 millisecond',
		        finished_at = CASE WHEN $2 IN ('COMMITTED', 'INVALID') THEN now() - $3::bigint * interval '1 millisecond' END
		    WHERE seq = $1 RETURNING seq, service_id, batch_id
		), a AS (
		    INSERT INTO batchclaim.submission_attempts (seq, service_id, batch_id, instance_id, epoch, reason)
		    SELECT seq, service_id, batch_id, gen_random_uuid(), 1, 'first' FROM b
		)
		INSERT INTO batchclaim.batch_transitions (seq, from_state, to_state) SELECT seq, 'NEW', $2 FROM b`,
		s.Seq, state, age.Milliseconds()); err != nil {
		t.Fatal(err)
	}
	return s.Seq
}

// rowsOf counts, per seq, the rows left in batches, submission_attempts and batch_transitions.
func rowsOf(t *testing.T, pool *pgxpool.Pool, seqs []int64) (batches, attempts, transitions int) {
	t.Helper()
	if err := pool.QueryRow(t.Context(), `
		SELECT (SELECT count(*) FROM batchclaim.batches WHERE seq = ANY($1)),
		       (SELECT count(*) FROM batchclaim.submission_attempts WHERE seq = ANY($1)),
		       (SELECT count(*) FROM batchclaim.batch_transitions WHERE seq = ANY($1))`, seqs).Scan(&batches, &attempts, &transitions); err != nil {
		t.Fatal(err)
	}
	return batches, attempts, transitions
}

func dbNow(t *testing.T, pool *pgxpool.Pool, plus time.Duration) *time.Time {
	t.Helper()
	var now time.Time
	if err := pool.QueryRow(t.Context(), `SELECT now() + $1::bigint * interval '1 millisecond'`, plus.Milliseconds()).Scan(&now); err != nil {
		t.Fatal(err)
	}
	return &now
}

// Finished batches whose finish time is older than the age go, oldest first, at most Chunk
// per statement and MaxChunks per run, with their attempts and transitions; unfinished
// batches, recently finished ones and the INVALID batch of a halted service_id stay.
func TestRetentionPrunesOldFinishedBatchesInChunks(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.NewPool(t)
	const day = 24 * time.Hour
	// Ten finished batches 3 days old (oldest first: 3d+10m ... 3d+1m), alternately COMMITTED
	// and INVALID, over two service_ids.
	var old []int64
	for i := range 10 {
		state := []string{"COMMITTED", "INVALID"}[i%2]
		old = append(old, storeAged(t, pool, fmt.Sprintf("svc-%d", i%2), fmt.Sprintf("old-%d", i), state, 3*day+time.Duration(10-i)*time.Minute))
	}
	var kept []int64
	for i, state := range []string{"NEW", "PENDING", "UNKNOWN", "DELAYED", "INFLIGHT", "VALID"} {
		kept = append(kept, storeAged(t, pool, "svc-open", fmt.Sprintf("open-%d", i), state, 30*day))
	}
	kept = append(kept, storeAged(t, pool, "svc-0", "fresh-c", "COMMITTED", 0), storeAged(t, pool, "svc-1", "fresh-i", "INVALID", time.Hour))
	halted := storeAged(t, pool, "svc-halted", "halting", "INVALID", 30*day)
	kept = append(kept, halted)
	if _, err := pool.Exec(ctx, `INSERT INTO batchclaim.service_halts (service_id, seq, reason) VALUES ('svc-halted', $1, 'batch INVALID')`, halted); err != nil {
		t.Fatal(err)
	}

	me := uuid.New()
	r, err := observer.NewRetention(dbtest.Open(t, pool, ""), observer.RetentionConfig{MaxAge: 7 * day, Chunk: 4, MaxChunks: 2, InstanceID: me})
	if err != nil {
		t.Fatal(err)
	}
	// By the database's clock nothing is 7 days old yet.
	if run, err := r.PruneOnce(ctx, nil); err != nil || run.Pruned != 0 || run.Chunks != 1 {
		t.Fatalf("run now: %+v, %v; want one chunk deleting nothing", run, err)
	}
	// Five days on, the 3-day-old ones are 8 days old: 10 to delete, 4 a chunk, 2 chunks a run.
	later := dbNow(t, pool, 5*day)
	run, err := r.PruneOnce(ctx, later)
	if err != nil || run.Pruned != 8 || run.Chunks != 2 || run.Busy {
		t.Fatalf("first run: %+v, %v; want 8 batches deleted in 2 chunks of 4", run, err)
	}
	if b, a, tr := rowsOf(t, pool, old[:8]); b+a+tr != 0 {
		t.Fatalf("the 8 oldest finished batches left %d batches, %d attempts, %d transitions", b, a, tr)
	}
	if b, _, _ := rowsOf(t, pool, old[8:]); b != 2 {
		t.Fatalf("%d of the 2 youngest old batches left, want both: deletion goes oldest first", b)
	}
	run, err = r.PruneOnce(ctx, later)
	if err != nil || run.Pruned != 2 || run.Chunks != 1 {
		t.Fatalf("second run: %+v, %v; want the last 2 deleted in one chunk", run, err)
	}
	if b, a, tr := rowsOf(t, pool, old); b+a+tr != 0 {
		t.Fatalf("old finished batches left %d batches, %d attempts, %d transitions", b, a, tr)
	}
	if b, a, tr := rowsOf(t, pool, kept); b != len(kept) || a != len(kept) || tr != len(kept) {
		t.Fatalf("kept batches have %d batches, %d attempts, %d transitions; want %d of each", b, a, tr, len(kept))
	}
	if st := r.Stats(); st.Pruned != 10 || !st.LastRun.Equal(*later) {
		t.Fatalf("stats %+v, want 10 pruned and the last run at %s", st, later)
	}
	var (
		by                  uuid.UUID
		maxAge, last, total int64
	)
	if err := pool.QueryRow(ctx, `SELECT instance_id, max_age_ms, last_run_pruned, pruned_total FROM batchclaim.retention_state`).Scan(&by, &maxAge, &last, &total); err != nil {
		t.Fatal(err)
	}
	if by != me || maxAge != (7*day).Milliseconds() || last != 2 || total != 10 {
		t.Fatalf("retention_state: instance %s, max age %dms, last run %d, total %d; want %s, %d, 2, 10", by, maxAge, last, total, me, (7 * day).Milliseconds())
	}
}

// While another instance holds the retention lock (it is deleting a chunk), a run deletes
// nothing and says so; once the lock is free, it does the work.
func TestRetentionRunsOnOneInstanceAtATime(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.NewPool(t)
	var seqs []int64
	for i := range 5 {
		seqs = append(seqs, storeAged(t, pool, "svc", fmt.Sprintf("b%d", i), "COMMITTED", 2*time.Hour))
	}
	newRetention := func() *observer.Retention {
		r, err := observer.NewRetention(dbtest.Open(t, pool, ""), observer.RetentionConfig{MaxAge: time.Hour, InstanceID: uuid.New()})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	a, b := newRetention(), newRetention()

	// Instance a inside its chunk transaction, holding the lock.
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	var locked bool
	if err := tx.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock(hashtextextended('batchclaim.retention', 0))`).Scan(&locked); err != nil || !locked {
		t.Fatalf("take the lock: %v, %v", locked, err)
	}
	run, err := b.PruneOnce(ctx, nil)
	if err != nil || !run.Busy || run.Pruned != 0 || run.Chunks != 0 {
		t.Fatalf("run while another holds the lock: %+v, %v; want busy, nothing deleted", run, err)
	}
	if n, _, _ := rowsOf(t, pool, seqs); n != len(seqs) {
		t.Fatalf("%d batches left, want all %d", n, len(seqs))
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}

	// Both at once: the batches are deleted once, whoever gets each chunk.
	runs := make(chan observer.RetentionRun, 2)
	for _, r := range []*observer.Retention{a, b} {
		go func() {
			run, err := r.PruneOnce(ctx, nil)
			if err != nil {
				t.Error(err)
			}
			runs <- run
		}()
	}
	got := []int64{(<-runs).Pruned, (<-runs).Pruned}
	slices.Sort(got)
	if n, _, _ := rowsOf(t, pool, seqs); n != 0 || got[0]+got[1] != int64(len(seqs)) {
		t.Fatalf("after two concurrent runs: %d batches left, runs deleted %v; want 0 left and %d deleted in all", n, got, len(seqs))
	}
}

// Retention needs a positive age, and a DB.
func TestRetentionConfig(t *testing.T) {
	t.Parallel()
	if _, err := observer.NewRetention(pgdb.DB{}, observer.RetentionConfig{MaxAge: time.Hour}); err == nil {
		t.Error("NewRetention accepted the zero DB")
	}
	db := dbtest.Open(t, &pgxpool.Pool{}, "") // never used: New does no I/O
	for _, c := range []observer.RetentionConfig{{}, {MaxAge: -time.Hour}, {MaxAge: time.Hour, Chunk: -1}} {
		if _, err := observer.NewRetention(db, c); err == nil || !strings.Contains(err.Error(), "observer: retention: ") {
			t.Errorf("NewRetention(%+v) = %v, want the config refused", c, err)
		}
	}
}

// sqlTrace records the statements run on a pool it traces.
type sqlTrace struct {
	mu   sync.Mutex
	stmt []recorded
}

type recorded struct {
	sql  string
	args []any
}

func (r *sqlTrace) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stmt = append(r.stmt, recorded{d.SQL, d.Args})
	return ctx
}

func (r *sqlTrace) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// A chunk reads only the rows it deletes: over 20,000 old finished batches, the plan of the
// DELETE reads batches through batches_finished_idx and the primary key, never by a
// sequential scan, and no scan of batches returns more rows than the chunk.
func TestRetentionChunkReadsOnlyItsRows(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.NewPool(t)
	if _, err := pool.Exec(ctx, `
		INSERT INTO batchclaim.batches (service_id, batch_id, payload, state, updated_at, finished_at)
		SELECT 'svc-' || (i % 50), 'b' || i, '\x00', CASE WHEN i % 100 = 0 THEN 'PENDING' ELSE 'COMMITTED' END,
		       now() - interval '30 days' - i * interval '1 second',
		       CASE WHEN i % 100 = 0 THEN NULL ELSE now() - interval '30 days' - i * interval '1 second' END
		FROM generate_series(1, 20000) i;
		ANALYZE batchclaim.batches;`); err != nil {
		t.Fatal(err)
	}
	rec := &sqlTrace{}
	pc := pool.Config()
	pc.ConnConfig.Tracer = rec
	traced, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		t.Fatal(err)
	}
	defer traced.Close()
	const chunk = 100
	r, err := observer.NewRetention(dbtest.Open(t, traced, ""), observer.RetentionConfig{MaxAge: 24 * time.Hour, Chunk: chunk, MaxChunks: 1, InstanceID: uuid.New()})
	if err != nil {
		t.Fatal(err)
	}
	if run, err := r.PruneOnce(ctx, nil); err != nil || run.Pruned != chunk {
		t.Fatalf("run: %+v, %v; want %d deleted", run, err, chunk)
	}
	var checked int
	for _, s := range rec.stmt {
		if !strings.HasPrefix(strings.TrimSpace(s.sql), "-- name: RetentionPrune ") {
			continue
		}
		checked++
		tx, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var raw []byte
		err = tx.QueryRow(ctx, "EXPLAIN (ANALYZE, FORMAT JSON) "+s.sql, s.args...).Scan(&raw)
		_ = tx.Rollback(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var plan []struct {
			Plan planNode `json:"Plan"`
		}
		if err := json.Unmarshal(raw, &plan); err != nil {
			t.Fatal(err)
		}
		var indexes []string
		plan[0].Plan.walk(func(n planNode) {
			if n.Index != "" {
				indexes = append(indexes, n.Index)
			}
			if n.Relation == "batches" && (n.Type == "Seq Scan" || n.ActualRows > chunk) {
				t.Errorf("the chunk's DELETE reads batches by %s (index %q) and gets %v rows; want at most %d through an index",
					n.Type, n.Index, n.ActualRows, chunk)
			}
		})
		if !slices.Contains(indexes, "batches_finished_idx") {
			t.Errorf("the chunk's DELETE uses indexes %v, want batches_finished_idx", indexes)
		}
	}
	if checked == 0 {
		t.Fatal("no RetentionPrune statement recorded")
	}
}

type planNode struct {
	Type       string     `json:"Node Type"`
	Relation   string     `json:"Relation Name"`
	Index      string     `json:"Index Name"`
	ActualRows float64    `json:"Actual Rows"`
	Plans      []planNode `json:"Plans"`
}

func (n planNode) walk(f func(planNode)) {
	f(n)
	for _, c := range n.Plans {
		c.walk(f)
	}
}
