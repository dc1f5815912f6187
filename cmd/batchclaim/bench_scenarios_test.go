package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batchclaim/batchclaim/claims"
	"github.com/batchclaim/batchclaim/cmd/batchclaim/internal/bench"
	"github.com/batchclaim/batchclaim/cmd/batchclaim/internal/database"
	"github.com/batchclaim/batchclaim/cmd/batchclaim/internal/testbin"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
)

// benchJSON runs the built binary's bench with args and returns its one JSON line, checking
// that stdout holds nothing else.
func benchJSON(t *testing.T, bin string, args ...string) map[string]any {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"bench", "--json"}, args...)...)
	cmd.Env = append(os.Environ(), "DATABASE_URL="+dbtest.AdminURL(t))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("bench %v: %v\nstderr:\n%s", args, err, stderr.String())
	}
	var lines []map[string]any
	sc := bufio.NewScanner(&stdout)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("stdout line %q is not one JSON object: %v", sc.Text(), err)
		}
		lines = append(lines, m)
	}
	if len(lines) != 1 {
		t.Fatalf("bench %v: want one JSON line, got %d: %s", args, len(lines), stdout.String())
	}
	return lines[0]
}

// hasFields fails the test for every field missing from m.
func hasFields(t *testing.T, m map[string]any, fields ...string) {
	t.Helper()
	for _, f := range fields {
		if _, ok := m[f]; !ok {
			t.Errorf("%v: no field %q in %v", m["scenario"], f, m)
		}
	}
}

func num(m map[string]any, field string) float64 {
	f, _ := m[field].(float64)
	return f
}

// The failover scenario on a small fleet: each fault once, every measurement observed (a POST
// by another instance after the fault) and reported beside its target.
func TestBenchFailoverScenario(t *testing.T) {
	t.Parallel()
	bin := testbin.Path(t)
	m := benchJSON(t, bin, "--scenario", "failover", "--failover-instances", "2", "--failover-service-ids", "6", "--failover-repeat", "1")
	if m["scenario"] != "failover" {
		t.Fatalf("scenario %v", m["scenario"])
	}
	hasFields(t, m, "instances", "service_ids", "repeat", "renew_interval_ms", "expiry_1_ms", "expiry_2_ms",
		"takeover_idle_seconds", "takeover_busy_seconds", "handover_sigterm_seconds", "targets_met", "seconds")
	r, t1, t2 := num(m, "renew_interval_ms")/1000, num(m, "expiry_1_ms")/1000, num(m, "expiry_2_ms")/1000
	for field, target := range map[string]float64{"takeover_idle_seconds": t1 + 2*r, "takeover_busy_seconds": t2 + 2*r, "handover_sigterm_seconds": 2 * r} {
		x, _ := m[field].(map[string]any)
		hasFields(t, x, "samples", "max", "mean", "target", "target_formula", "met")
		samples, _ := x["samples"].([]any)
		if len(samples) != 1 {
			t.Errorf("%s: samples %v, want one", field, x["samples"])
		}
		// A takeover observed: a POST by another instance after the fault.
		if num(x, "max") <= 0 || num(x, "mean") <= 0 || num(x, "mean") > num(x, "max") {
			t.Errorf("%s: max %v, mean %v", field, x["max"], x["mean"])
		}
		if num(x, "target") != target {
			t.Errorf("%s: target %v, want %v from the timings", field, x["target"], target)
		}
		if met, _ := x["met"].(bool); met != (num(x, "max") <= target) {
			t.Errorf("%s: met %v with max %v and target %v", field, x["met"], x["max"], target)
		}
	}
}

// The scale scenario on four processes: the claims balance, and the processes' metrics are
// read, the cycle-duration histogram among them.
func TestBenchScaleScenario(t *testing.T) {
	t.Parallel()
	bin := testbin.Path(t)
	m := benchJSON(t, bin, "--scenario", "scale", "--scale-processes", "4", "--scale-service-ids", "2000", "--scale-intervals", "3")
	if m["scenario"] != "scale" {
		t.Fatalf("scenario %v", m["scenario"])
	}
	hasFields(t, m, "processes", "service_ids", "renew_interval_ms", "expiry_1_ms", "expiry_2_ms", "seconds_to_balance",
		"held_min", "held_max", "self_fencings", "cycle_ms_p99", "idle_cycle_ms_p50", "idle_cycle_ms_p99", "cycle_ms_note",
		"idle_statements_per_instance_per_interval", "idle_window_seconds", "still_balanced",
		"rss_mib_per_instance_mean", "rss_mib_per_instance_max", "db_connections_per_instance", "claim_cycles")
	if num(m, "seconds_to_balance") <= 0 || num(m, "held_min") != 500 || num(m, "held_max") != 500 {
		t.Errorf("balance: %v s, held %v..%v; want 500 each of 2,000 over 4", m["seconds_to_balance"], m["held_min"], m["held_max"])
	}
	// Every cycle sends at least one statement, so none takes no time; none of these few
	// takes more than the histogram's top bound.
	if p99, idle50, idle99 := num(m, "cycle_ms_p99"), num(m, "idle_cycle_ms_p50"), num(m, "idle_cycle_ms_p99"); p99 <= 0 || p99 > 10000 || idle50 <= 0 || idle99 < idle50 {
		t.Errorf("cycle ms: p99 %v, idle p50 %v, idle p99 %v", p99, idle50, idle99)
	}
	if num(m, "idle_statements_per_instance_per_interval") <= 0 || num(m, "idle_window_seconds") <= 0 {
		t.Errorf("idle statements %v over %v s: want some (every renewal is one)", m["idle_statements_per_instance_per_interval"], m["idle_window_seconds"])
	}
	if num(m, "rss_mib_per_instance_mean") <= 0 || num(m, "rss_mib_per_instance_max") < num(m, "rss_mib_per_instance_mean") {
		t.Errorf("rss mean %v, max %v", m["rss_mib_per_instance_mean"], m["rss_mib_per_instance_max"])
	}
	if num(m, "self_fencings") < 0 || num(m, "claim_cycles") <= 0 {
		t.Errorf("self-fencings %v, cycles %v", m["self_fencings"], m["claim_cycles"])
	}
}

// teeTracer passes every trace to two tracers.
type teeTracer struct {
	a, b interface {
		pgx.QueryTracer
		pgx.BatchTracer
		pgx.CopyFromTracer
	}
}

func (t teeTracer) TraceQueryStart(ctx context.Context, c *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	return t.b.TraceQueryStart(t.a.TraceQueryStart(ctx, c, d), c, d)
}
func (t teeTracer) TraceQueryEnd(ctx context.Context, c *pgx.Conn, d pgx.TraceQueryEndData) {
	t.a.TraceQueryEnd(ctx, c, d)
	t.b.TraceQueryEnd(ctx, c, d)
}
func (t teeTracer) TraceBatchStart(ctx context.Context, c *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	return t.b.TraceBatchStart(t.a.TraceBatchStart(ctx, c, d), c, d)
}
func (t teeTracer) TraceBatchQuery(ctx context.Context, c *pgx.Conn, d pgx.TraceBatchQueryData) {
	t.a.TraceBatchQuery(ctx, c, d)
	t.b.TraceBatchQuery(ctx, c, d)
}
func (t teeTracer) TraceBatchEnd(ctx context.Context, c *pgx.Conn, d pgx.TraceBatchEndData) {
	t.a.TraceBatchEnd(ctx, c, d)
	t.b.TraceBatchEnd(ctx, c, d)
}
func (t teeTracer) TraceCopyFromStart(ctx context.Context, c *pgx.Conn, d pgx.TraceCopyFromStartData) context.Context {
	return t.b.TraceCopyFromStart(t.a.TraceCopyFromStart(ctx, c, d), c, d)
}
func (t teeTracer) TraceCopyFromEnd(ctx context.Context, c *pgx.Conn, d pgx.TraceCopyFromEndData) {
	t.a.TraceCopyFromEnd(ctx, c, d)
	t.b.TraceCopyFromEnd(ctx, c, d)
}

// batchclaim_db_statements_total counts what `run`'s pool sends, the lease loop's renewals
// on their own connection included: the loop dials it from the pool's connection config,
// which carries the tracer.
func TestStmtMetricCountsLeaseRenewals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	reg, metric := runRegistry()
	names := bench.NewStmtCounter()
	pool, err := database.Open(ctx, dbtest.NewDB(t), 2, func(cfg *pgxpool.Config) { cfg.ConnConfig.Tracer = teeTracer{metric, names} })
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	eng, err := claims.New(dbtest.Open(t, pool, ""), claims.Config{Name: "stmt-metric", RenewInterval: 100 * time.Millisecond, Expiry1: time.Second, Expiry2: 4 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	// Register, then Run: Run's cycles leave the renewals to the lease loop.
	if err := eng.Register(ctx); err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- eng.Run(rctx) }()
	deadline := time.Now().Add(30 * time.Second)
	for names.Calls("InstanceHeartbeat") < 3 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	<-done
	if err := eng.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if n := names.Calls("InstanceHeartbeat"); n < 3 {
		t.Fatalf("%d lease renewals traced; want the lease loop's connection traced too", n)
	}
	all, txControl, _ := names.Totals(1)
	if txControl == 0 {
		t.Errorf("no BEGIN/COMMIT among %d statements", all)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var got float64
	for _, f := range families {
		if f.GetName() == "batchclaim_db_statements_total" {
			got = f.GetMetric()[0].GetCounter().GetValue()
		}
	}
	if got != float64(all) {
		t.Errorf("batchclaim_db_statements_total = %v; the statements traced were %d", got, all)
	}
}

// The churn scenario on 5,000 keys ever seen, 250 with work, dropped in chunks of 500 rows
// (ten drop statements at least) and at half the default renew interval: the idle rows are
// dropped down to the keys with work, and every side reports its cycles and statements.
func TestBenchChurnScenario(t *testing.T) {
	t.Parallel()
	bin := testbin.Path(t)
	m := benchJSON(t, bin, "--scenario", "churn", "--churn-keys", "5000", "--churn-active", "250", "--churn-engines", "2",
		"--churn-chunk-size", "500", "--churn-renew-interval", "500ms", "--churn-drop-idle-after", "1s", "--churn-window", "1500ms")
	if m["scenario"] != "churn" {
		t.Fatalf("scenario %v", m["scenario"])
	}
	hasFields(t, m, "engines", "keys_with_work", "keys_ever_seen", "renew_interval_ms", "drop_idle_after_ms", "chunk_size", "server_autovacuum",
		"baseline", "baseline_drop_idle", "churn", "method")
	if num(m, "chunk_size") != 500 || num(m, "renew_interval_ms") != 500 || num(m, "drop_idle_after_ms") != 1000 {
		t.Errorf("chunk %v rows, R %v ms, drop idle after %v ms: want the flags' 500, 500 and 1000", m["chunk_size"], m["renew_interval_ms"], m["drop_idle_after_ms"])
	}
	for _, side := range []string{"baseline", "baseline_drop_idle", "churn"} {
		p, _ := m[side].(map[string]any)
		hasFields(t, p, "keys_ever_seen", "drop_idle_after_ms", "claim_rows_at_start", "seconds_to_drop_idle_rows", "claim_rows_left",
			"rows_dropped", "dropped_rows_per_second", "steady", "drain_cycles", "drain_cycle_p50_ms", "drain_cycle_p99_ms", "drain_cycle_max_ms", "seconds_to_balance",
			"self_fencings", "window_seconds", "cycles", "cycle_errors", "cycle_p50_ms", "cycle_p99_ms",
			"statements_per_instance_per_interval", "statements", "after_vacuum")
		if num(p, "claim_rows_left") != 250 || p["steady"] != true {
			t.Errorf("%s: %v claim rows left (steady %v), want the 250 keys with work", side, p["claim_rows_left"], p["steady"])
		}
		if num(p, "cycles") <= 0 || num(p, "cycle_p50_ms") <= 0 || num(p, "cycle_p99_ms") < num(p, "cycle_p50_ms") {
			t.Errorf("%s: %v cycles, p50 %v ms, p99 %v ms", side, p["cycles"], p["cycle_p50_ms"], p["cycle_p99_ms"])
		}
		if num(p, "statements_per_instance_per_interval") <= 0 {
			t.Errorf("%s: no statements counted", side)
		}
	}
	churn, _ := m["churn"].(map[string]any)
	if num(churn, "rows_dropped") != 4750 || churn["seconds_to_drop_idle_rows"] == nil || num(churn, "drain_cycles") <= 0 {
		t.Errorf("churn: dropped %v rows after %v s in %v cycles; want the 4,750 idle rows dropped",
			churn["rows_dropped"], churn["seconds_to_drop_idle_rows"], churn["drain_cycles"])
	}
	if v, _ := churn["after_vacuum"].(map[string]any); num(v, "cycles") <= 0 || num(v, "statements_per_instance_per_interval") <= 0 {
		t.Errorf("churn: after_vacuum %v: want a second window once the idle rows were gone", churn["after_vacuum"])
	}
	if base, _ := m["baseline"].(map[string]any); num(base, "rows_dropped") != 0 || base["seconds_to_drop_idle_rows"] != nil {
		t.Errorf("baseline: dropped %v rows, drain %v; it has no idle rows", base["rows_dropped"], base["seconds_to_drop_idle_rows"])
	}
}

// The producer scenarios on a small shape: enqueue counts the jobs the producers stored while
// the nodes worked; bulk times its calls of EnqueueMany; steady paces the producers and
// reports every job's latencies by window, each job started and done after its enqueue began.
func TestBenchProducerScenarios(t *testing.T) {
	t.Parallel()
	bin := testbin.Path(t)
	shape := []string{"--producers", "4", "--producer-keys", "20"}
	m := benchJSON(t, bin, append([]string{"--scenario", "enqueue", "--enqueue-duration", "2s"}, shape...)...)
	hasFields(t, m, "producers", "keys", "nodes", "workers_per_node", "method", "jobs", "seconds", "jobs_per_second",
		"call_p50_ms", "call_p99_ms", "call_max_ms", "ended_while_producing")
	if m["scenario"] != "enqueue" || num(m, "jobs") <= 0 || num(m, "jobs_per_second") <= 0 || num(m, "call_p99_ms") < num(m, "call_p50_ms") {
		t.Errorf("enqueue: %v", m)
	}
	for _, withoutIDs := range []bool{false, true} {
		m = benchJSON(t, bin, "--scenario", "bulk", "--bulk-jobs", "300", "--bulk-runs", "3", "--producer-keys", "20", "--bulk-without-ids="+strconv.FormatBool(withoutIDs))
		hasFields(t, m, "keys", "jobs_per_call", "without_ids", "calls", "call_seconds", "best_seconds", "median_seconds", "jobs_per_second", "method")
		if calls, _ := m["call_seconds"].([]any); m["scenario"] != "bulk" || m["without_ids"] != withoutIDs || len(calls) != 3 || num(m, "best_seconds") <= 0 ||
			num(m, "median_seconds") < num(m, "best_seconds") || num(m, "jobs_per_second") <= 0 {
			t.Errorf("bulk: %v", m)
		}
	}
	m = benchJSON(t, bin, append([]string{"--scenario", "steady", "--steady-rate", "40", "--steady-duration", "3s", "--steady-window", "1s"}, shape...)...)
	hasFields(t, m, "rate_asked", "rate_achieved", "jobs", "window_s", "all", "windows", "call_p50_ms")
	if m["scenario"] != "steady" || num(m, "jobs") != 120 {
		t.Fatalf("steady: %v jobs, want 40 a second for 3s", m["jobs"])
	}
	windows, _ := m["windows"].([]any)
	if len(windows) < 3 { // a job late on a busy machine may begin in a fourth
		t.Fatalf("steady: %d windows, want 3: %v", len(windows), m["windows"])
	}
	all, _ := m["all"].(map[string]any)
	total := 0.0
	for _, w := range append(windows, all) {
		w, _ := w.(map[string]any)
		hasFields(t, w, "from_s", "jobs", "enqueue_to_start_p50_ms", "enqueue_to_start_p99_ms", "enqueue_to_start_max_ms",
			"enqueue_to_done_p50_ms", "enqueue_to_done_p99_ms", "enqueue_to_done_max_ms")
		if num(w, "jobs") == 0 {
			continue
		}
		if num(w, "enqueue_to_start_p50_ms") <= 0 || num(w, "enqueue_to_done_p50_ms") < num(w, "enqueue_to_start_p50_ms") ||
			num(w, "enqueue_to_done_max_ms") < num(w, "enqueue_to_done_p99_ms") {
			t.Errorf("steady window %v", w)
		}
		total += num(w, "jobs")
	}
	if total != 240 || num(all, "jobs") != 120 {
		t.Errorf("steady: %v jobs in the windows and %v in all, want 120 each", total-num(all, "jobs"), num(all, "jobs"))
	}
}
