package node

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/submitter"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
)

// sqlRecorder passes queries to a pool and keeps their text and arguments.
type sqlRecorder struct {
	*pgxpool.Pool
	mu      sync.Mutex
	queries []recordedSQL
}

type recordedSQL struct {
	sql  string
	args []any
}

func (r *sqlRecorder) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	r.mu.Lock()
	r.queries = append(r.queries, recordedSQL{sql, args})
	r.mu.Unlock()
	return r.Pool.Query(ctx, sql, args...)
}

func (r *sqlRecorder) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	r.mu.Lock()
	r.queries = append(r.queries, recordedSQL{sql, args})
	r.mu.Unlock()
	return r.Pool.QueryRow(ctx, sql, args...)
}

func (r *sqlRecorder) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	r.mu.Lock()
	r.queries = append(r.queries, recordedSQL{sql, args})
	r.mu.Unlock()
	return r.Pool.Exec(ctx, sql, args...)
}

// A scrape of the batch gauge reads open batches only: with 20,000 finished batches and 12
// open ones, the plan of every statement the scrape runs touches batches through the
// partial index over open batches and reads no more rows of it than are open. The gauge
// has a series per unfinished state and none for COMMITTED or INVALID (those are counted by
// batchclaim_batch_transitions_total).
func TestBatchGaugeScrapeReadsOpenBatchesOnly(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.NewPool(t)
	const open = 12
	if _, err := pool.Exec(ctx, `
		INSERT INTO batchclaim.batches (service_id, batch_id, payload, state)
		SELECT 'svc-' || (i % 50), 'done-' || i, '\x00', CASE WHEN i % 10 = 0 THEN 'INVALID' ELSE 'COMMITTED' END
		FROM generate_series(1, 20000) i;
		INSERT INTO batchclaim.batches (service_id, batch_id, payload, state)
		SELECT 'svc-' || i, 'open-' || i, '\x00', (ARRAY['NEW', 'PENDING', 'UNKNOWN', 'DELAYED'])[1 + i % 4]
		FROM generate_series(1, 12) i;
		ANALYZE batchclaim.batches;`); err != nil {
		t.Fatal(err)
	}
	rec := &sqlRecorder{Pool: pool}
	b := &batchStates{pool: rec}
	b.ctx.Store(&ctx)
	reg := prometheus.NewRegistry()
	reg.MustRegister(b)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "state" {
					got[l.GetValue()] = m.GetGauge().GetValue()
				}
			}
		}
	}
	want := map[string]float64{"NEW": 3, "INFLIGHT": 0, "PENDING": 3, "DELAYED": 3, "UNKNOWN": 3, "VALID": 0}
	if len(got) != len(want) {
		t.Errorf("gauge series %v, want exactly %v", got, want)
	}
	for st, n := range want {
		if v, ok := got[st]; !ok || v != n {
			t.Errorf("batchclaim_batches{state=%q} = %v (present %v), want %v", st, v, ok, n)
		}
	}
	if len(rec.queries) == 0 {
		t.Fatal("the scrape ran no query")
	}
	for _, q := range rec.queries {
		var plan []struct {
			Plan planNode `json:"Plan"`
		}
		var raw []byte
		if err := pool.QueryRow(ctx, "EXPLAIN (ANALYZE, FORMAT JSON) "+q.sql, q.args...).Scan(&raw); err != nil {
			t.Fatalf("explain %q: %v", q.sql, err)
		}
		if err := json.Unmarshal(raw, &plan); err != nil {
			t.Fatal(err)
		}
		plan[0].Plan.walk(func(n planNode) {
			bad := n.Index != "" && n.Index != "batches_open_idx" ||
				n.Relation == "batches" && (n.Type == "Seq Scan" || n.ActualRows > open)
			if bad {
				t.Errorf("the scrape's query reads batches by %s (index %q, relation %q) and gets %v rows; want the open batches only, through batches_open_idx:\n%s",
					n.Type, n.Index, n.Relation, n.ActualRows, strings.TrimSpace(q.sql))
			}
		})
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

// measure counts each job under its own verdict and HTTP status, from many workers at once,
// though it looks each child up only once.
func TestMeasureCountsByVerdictAndStatus(t *testing.T) {
	t.Parallel()
	m := newMetrics(nil)
	results := []batchclaim.Result{{Verdict: batchclaim.Done, HTTPStatus: 200}, {Verdict: batchclaim.Retry, HTTPStatus: 503},
		{Verdict: batchclaim.Unknown}, {Verdict: batchclaim.Done, HTTPStatus: 200}}
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 100; i++ {
				r := results[(w+i)%len(results)]
				m.measure(t.Context(), submitter.Job{}, func(context.Context) (batchclaim.Result, error) { return r, nil })
			}
		}()
	}
	wg.Wait()
	reg := prometheus.NewRegistry()
	reg.MustRegister(m.responses, m.submitLatency)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range families {
		for _, s := range f.GetMetric() {
			l := s.GetLabel()[0]
			got[f.GetName()+" "+l.GetValue()] = s.GetCounter().GetValue() + float64(s.GetHistogram().GetSampleCount())
		}
	}
	want := map[string]float64{
		"batchclaim_dlt_responses_total 200": 400, "batchclaim_dlt_responses_total 503": 200, "batchclaim_dlt_responses_total 0": 200,
		"batchclaim_submit_latency_seconds done": 400, "batchclaim_submit_latency_seconds retry": 200, "batchclaim_submit_latency_seconds unknown": 200,
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("series %v, want %v", got, want)
	}
}

// BenchmarkMeasure is the metrics middleware around a job that does nothing: what it costs a
// job on the worker's side.
func BenchmarkMeasure(b *testing.B) {
	m := newMetrics(nil)
	next := func(context.Context) (batchclaim.Result, error) {
		return batchclaim.Result{Verdict: batchclaim.Done, HTTPStatus: 200}, nil
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		m.measure(ctx, submitter.Job{}, next)
	}
}
