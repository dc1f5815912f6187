package node_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batchclaim/batchclaim/dlt"
	"github.com/batchclaim/batchclaim/dlt/dltsim"
	"github.com/batchclaim/batchclaim/node"
	"github.com/batchclaim/batchclaim/testkit/testutil"
)

// The listener serves health, readiness and the metrics operators need.
func TestHealthReadinessMetrics(t *testing.T) {
	t.Parallel()
	e := setup(t, dlt.FlavorSawtooth, dltsim.Config{CommitLatency: 5 * time.Millisecond})
	e.enqueue(3, 2)
	n, _ := e.start("a", func(c *node.Config) { c.Listen = "127.0.0.1:0" })
	testutil.WaitFor(t, 10*time.Second, "listener up", func() bool { return n.Addr() != "" })
	base := "http://" + n.Addr()
	get := func(path string) (int, string) {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := get("/healthz"); code != 200 {
		t.Fatalf("/healthz %d", code)
	}
	testutil.WaitFor(t, 10*time.Second, "/readyz 200", func() bool { code, _ := get("/readyz"); return code == 200 })
	e.waitFinished(30 * time.Second)
	// The counters move after the transaction that finished a batch has committed.
	var metrics string
	testutil.WaitFor(t, 10*time.Second, "the six commits counted", func() bool {
		_, metrics = get("/metrics")
		return strings.Contains(metrics, "batchclaim_commit_latency_seconds_count 6") &&
			strings.Contains(metrics, `batchclaim_batch_transitions_total{to="COMMITTED"} 6`)
	})
	for _, m := range []string{
		"batchclaim_claims_held ", "batchclaim_claims_yielding ", "batchclaim_claims_gained_total ", "batchclaim_claims_lost_total ",
		"batchclaim_takeovers_total ", "batchclaim_serialization_retries_total ", `batchclaim_batches{state="NEW"} 0`,
		`batchclaim_batch_transitions_total{to="COMMITTED"} 6`, "batchclaim_batches_pruned_total 0",
		"batchclaim_retention_last_run_timestamp_seconds ",
		"batchclaim_submit_latency_seconds_bucket", "batchclaim_commit_latency_seconds_count 6",
		`batchclaim_dlt_responses_total{code="202"} 6`, "batchclaim_stale_writes_rejected_total ",
	} {
		if !strings.Contains(metrics, m) {
			t.Errorf("/metrics lacks %q", m)
		}
	}
	for _, st := range []string{"COMMITTED", "INVALID"} { // counted by transitions, not by scanning the table
		if m := `batchclaim_batches{state="` + st + `"}`; strings.Contains(metrics, m) {
			t.Errorf("/metrics has %s", m)
		}
	}
}

// /readyz and /metrics read on the listener's own connections: with every connection of the
// node's pool taken (by ingest, workers, anything), the instance still answers ready and its
// batch gauges are still read.
func TestProbesDoNotWaitForThePool(t *testing.T) {
	t.Parallel()
	e := setup(t, dlt.FlavorSawtooth, dltsim.Config{})
	cfg, err := pgxpool.ParseConfig(e.url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 2
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	n, _ := e.startPool(pool, "probes", func(c *node.Config) { c.Listen = "127.0.0.1:0" })
	testutil.WaitFor(t, 10*time.Second, "listener up", func() bool { return n.Addr() != "" })
	base := "http://" + n.Addr()
	client := &http.Client{Timeout: 10 * time.Second}
	get := func(path string) (int, string) {
		resp, err := client.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	testutil.WaitFor(t, 10*time.Second, "/readyz 200", func() bool { code, _ := get("/readyz"); return code == 200 })
	for range cfg.MaxConns {
		c, err := pool.Acquire(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Release()
	}
	if st := pool.Stat(); st.AcquiredConns() != cfg.MaxConns {
		t.Fatalf("%d of %d connections taken", st.AcquiredConns(), cfg.MaxConns)
	}
	for range 5 {
		if code, body := get("/readyz"); code != 200 {
			t.Fatalf("/readyz with the pool exhausted: %d %s", code, body)
		}
	}
	code, metrics := get("/metrics")
	if code != 200 || !strings.Contains(metrics, `batchclaim_batches{state="NEW"} 0`) || !strings.Contains(metrics, "batchclaim_database_readable 1") {
		t.Fatalf("/metrics with the pool exhausted: %d, batch gauges read: %v", code, strings.Contains(metrics, "batchclaim_batches{"))
	}
}

// MemoryBound is the formula of docs/operations.md, "Memory", with the defaults for zero
// fields.
func TestMemoryBound(t *testing.T) {
	t.Parallel()
	const MiB = 1 << 20
	for _, tt := range []struct {
		cfg   node.Config
		conns int32
		want  int64
	}{
		// 32 + 128 + 2 x 2 x 10 + (64 + 10) + (1024 + 16) x (64 + 16) KiB (the listener's
		// connections and the probes' reserve beyond them) + 1024 workers x 48 KiB
		{node.Config{}, 4, 32*MiB + 128*MiB + 40*MiB + 74*MiB + 80*MiB + 16*(80<<10) + 48*MiB},
		{node.Config{MaxBody: MiB, MaxIngestMemory: 16 * MiB, MaxSubmitMemory: 4 * MiB, MaxConnections: 64, MaxHeaderBytes: 16 << 10, Workers: 64}, 10,
			// A body of 1 MiB: the store's statements of small batches hold up to 4 MiB.
			32*MiB + 16*MiB + 5*4*MiB + 5*MiB + (64+16)*(32<<10) + 3*MiB},
		// One batch as large as a body goes alone even when it is larger than the submissions'
		// memory: max(1 MiB, 10 MiB) + 10 MiB.
		{node.Config{MaxSubmitMemory: MiB, MaxIngestMemory: 16 * MiB, MaxConnections: 64, MaxHeaderBytes: 16 << 10}, 4,
			32*MiB + 16*MiB + 2*2*10*MiB + 20*MiB + (64+16)*(32<<10) + 48*MiB},
	} {
		if got := tt.cfg.MemoryBound(tt.conns); got != tt.want {
			t.Errorf("%+v on %d connections: %d MiB, want %d MiB", tt.cfg, tt.conns, got/MiB, tt.want/MiB)
		}
	}
}

// /readyz answers from the listener's readiness pings: a flood of probes adds no database
// round trip, however many arrive.
func TestReadinessProbesCostNoRoundTrip(t *testing.T) {
	t.Parallel()
	e := setup(t, dlt.FlavorSawtooth, dltsim.Config{})
	n, _ := e.start("flood", func(c *node.Config) { c.Listen = "127.0.0.1:0" })
	testutil.WaitFor(t, 10*time.Second, "listener up", func() bool { return n.Addr() != "" })
	probe := func() int {
		resp, err := http.Get("http://" + n.Addr() + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	testutil.WaitFor(t, 10*time.Second, "/readyz 200", func() bool { return probe() == 200 })
	acquires := func() (sum float64) { // on the listener's pools: the probe pool and the readiness pings'
		fams := scrape(t, n)
		for _, pool := range []string{"probe", "readiness"} {
			v, ok := value(fams, "batchclaim_pool_acquires_total", map[string]string{"pool": pool})
			if !ok {
				t.Fatalf("/metrics lacks batchclaim_pool_acquires_total{pool=%q}", pool)
			}
			sum += v
		}
		return sum
	}
	before, start := acquires(), time.Now()
	const probes = 2000
	for range probes {
		if code := probe(); code != 200 {
			t.Fatalf("/readyz %d", code)
		}
	}
	// The pings (one per ReadinessInterval) and the two scrapes' reads are all there may be.
	got, most := acquires()-before, time.Since(start).Seconds()/node.ReadinessInterval.Seconds()+3
	t.Logf("%d probes in %v: %v acquires on the listener's pools", probes, time.Since(start).Round(time.Millisecond), got)
	if got > most {
		t.Errorf("%d probes took %v connections of the listener's pools, want at most %.0f", probes, got, most)
	}
}
