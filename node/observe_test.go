package node_test

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/dlt"
	"github.com/batchclaim/batchclaim/dlt/dltsim"
	"github.com/batchclaim/batchclaim/httpauth"
	"github.com/batchclaim/batchclaim/node"
	"github.com/batchclaim/batchclaim/submitter"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
	"github.com/batchclaim/batchclaim/testkit/testutil"
)

// scrape reads the node's /metrics and parses it.
func scrape(t *testing.T, n *node.Node) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get("http://" + n.Addr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// value is the value of the series of family name whose labels include want; ok is false
// when there is none.
func value(fams map[string]*dto.MetricFamily, name string, want map[string]string) (v float64, ok bool) {
	f := fams[name]
	if f == nil {
		return 0, false
	}
next:
	for _, m := range f.GetMetric() {
		got := map[string]string{}
		for _, l := range m.GetLabel() {
			got[l.GetName()] = l.GetValue()
		}
		for k, w := range want {
			if got[k] != w {
				continue next
			}
		}
		switch {
		case m.Gauge != nil:
			return m.GetGauge().GetValue(), true
		case m.Counter != nil:
			return m.GetCounter().GetValue(), true
		}
	}
	return 0, false
}

// /metrics names the build that runs and shows the statistics of both of the node's pools:
// its own (pool="node", the work's) and the listener's probe pool (pool="probe").
func TestBuildInfoAndPoolMetrics(t *testing.T) {
	t.Parallel()
	e := setup(t, dlt.FlavorSawtooth, dltsim.Config{})
	e.enqueue(2, 2)
	n, _ := e.start("obs", func(c *node.Config) {
		c.Listen = "127.0.0.1:0"
		c.Claims.Version = "9.8.7+test"
	})
	testutil.WaitFor(t, 10*time.Second, "listener up", func() bool { return n.Addr() != "" })
	e.waitFinished(30 * time.Second)
	testutil.WaitFor(t, 10*time.Second, "/readyz 200", func() bool {
		resp, err := http.Get("http://" + n.Addr() + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	_ = scrape(t, n) // its batch gauges are read on the probe pool: counted by the next scrape
	fams := scrape(t, n)

	if v, ok := value(fams, "batchclaim_build_info", map[string]string{"version": "9.8.7+test", "goversion": runtime.Version()}); !ok || v != 1 {
		t.Errorf("batchclaim_build_info{version=9.8.7+test, goversion=%s}: %v %v; families: %v", runtime.Version(), v, ok, fams["batchclaim_build_info"])
	}
	if f := fams["batchclaim_build_info"]; f == nil || len(f.GetMetric()) != 1 {
		t.Errorf("batchclaim_build_info: want one series, got %v", f)
	}

	for pool, max := range map[string]float64{"node": 8, "probe": node.ProbeConns, "readiness": node.ReadinessConns} {
		sel := map[string]string{"pool": pool}
		if v, ok := value(fams, "batchclaim_pool_max_conns", sel); !ok || v != max {
			t.Errorf("batchclaim_pool_max_conns{pool=%q} = %v %v, want %v", pool, v, ok, max)
		}
		// Every batch went through the node's pool, the first scrape's gauges through the
		// probe pool, the readiness pings through their own.
		if v, ok := value(fams, "batchclaim_pool_acquires_total", sel); !ok || v < 1 {
			t.Errorf("batchclaim_pool_acquires_total{pool=%q} = %v %v, want > 0", pool, v, ok)
		}
		total, _ := value(fams, "batchclaim_pool_total_conns", sel)
		idle, _ := value(fams, "batchclaim_pool_idle_conns", sel)
		acquired, _ := value(fams, "batchclaim_pool_acquired_conns", sel)
		if total < 1 || total > max || idle+acquired > total {
			t.Errorf("pool %q: total %v, idle %v, acquired %v (max %v)", pool, total, idle, acquired, max)
		}
		for _, name := range []string{"batchclaim_pool_acquire_wait_seconds_total", "batchclaim_pool_empty_acquires_total",
			"batchclaim_pool_canceled_acquires_total"} {
			if _, ok := value(fams, name, sel); !ok {
				t.Errorf("/metrics lacks %s{pool=%q}", name, pool)
			}
		}
	}
	// The node's pool opened connections on demand: some acquires found none idle.
	if v, _ := value(fams, "batchclaim_pool_empty_acquires_total", map[string]string{"pool": "node"}); v < 1 {
		t.Errorf("batchclaim_pool_empty_acquires_total{pool=node} = %v, want > 0", v)
	}
}

const testToken = "obs-test-token-0123456789abcdef0123456789"

// tokenAuth is the ingest API's token check, as `run --auth-token-file` sets it.
func tokenAuth(t *testing.T) func(http.Handler) http.Handler {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(path, []byte(testToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tokens, err := httpauth.LoadTokens(path)
	if err != nil {
		t.Fatal(err)
	}
	return tokens.Middleware
}

// The profiles are served under /debug/pprof/ only when Config.Pprof is on, and behind the
// same token as the ingest API.
func TestPprof(t *testing.T) {
	t.Parallel()
	e := setup(t, dlt.FlavorSawtooth, dltsim.Config{})
	get := func(n *node.Node, path, token string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, "http://"+n.Addr()+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	start := func(name string, pprof bool, auth func(http.Handler) http.Handler) *node.Node {
		n, _ := e.start(name, func(c *node.Config) { c.Listen, c.Pprof, c.Auth = "127.0.0.1:0", pprof, auth })
		testutil.WaitFor(t, 10*time.Second, "listener up", func() bool { return n.Addr() != "" })
		return n
	}

	on := start("pprof-on", true, tokenAuth(t))
	for _, path := range []string{"/debug/pprof/", "/debug/pprof/goroutine?debug=1", "/debug/pprof/cmdline"} {
		if code, _ := get(on, path, ""); code != http.StatusUnauthorized {
			t.Errorf("pprof on, GET %s without token: %d, want 401", path, code)
		}
		if code, _ := get(on, path, "wrong-token"); code != http.StatusUnauthorized {
			t.Errorf("pprof on, GET %s with a wrong token: %d, want 401", path, code)
		}
	}
	if code, body := get(on, "/debug/pprof/", testToken); code != 200 || !strings.Contains(body, "goroutine") {
		t.Errorf("pprof on, GET /debug/pprof/ with token: %d %.200q", code, body)
	}
	if code, body := get(on, "/debug/pprof/goroutine?debug=1", testToken); code != 200 || !strings.Contains(body, "goroutine profile:") {
		t.Errorf("pprof on, goroutine profile with token: %d %.200q", code, body)
	}

	off := start("pprof-off", false, tokenAuth(t))
	for _, path := range []string{"/debug/pprof/", "/debug/pprof/goroutine?debug=1", "/debug/pprof/cmdline"} {
		if code, _ := get(off, path, testToken); code != http.StatusNotFound {
			t.Errorf("pprof off, GET %s with token: %d, want 404", path, code)
		}
	}

	// On a loopback listener without Auth (as `run` allows), the profiles need no token.
	loop := start("pprof-loopback", true, nil)
	if code, _ := get(loop, "/debug/pprof/cmdline", ""); code != 200 {
		t.Errorf("pprof on a loopback listener without Auth: %d, want 200", code)
	}
}

// A node refuses to serve profiles where anyone could read them without a token.
func TestPprofConfigRefused(t *testing.T) {
	t.Parallel()
	pool, err := pgxpool.New(context.Background(), "postgres://127.0.0.1:1/none") // New does no I/O
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	done := submitter.SubmitterFunc(func(context.Context, batchclaim.Batch) (batchclaim.Result, error) {
		return batchclaim.Result{Verdict: batchclaim.Done}, nil
	})
	for _, tt := range []struct {
		listen string
		auth   bool
		want   string // "" accepts
	}{
		{listen: "", want: "set Listen"},
		{listen: ":0", want: "needs Auth"},
		{listen: "0.0.0.0:0", want: "needs Auth"},
		{listen: "example.com:8080", want: "needs Auth"},
		{listen: ":0", auth: true},
		{listen: "127.0.0.1:0"},
		{listen: "[::1]:0"},
		{listen: "localhost:0"},
	} {
		cfg := node.Config{Claims: testClaims("refused"), Submitter: done, Listen: tt.listen, Pprof: true}
		if tt.auth {
			cfg.Auth = tokenAuth(t)
		}
		_, err := node.New(dbtest.Open(t, pool, ""), cfg)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("listen %q auth %v: %v", tt.listen, tt.auth, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("listen %q auth %v: error %v, want one saying %q", tt.listen, tt.auth, err, tt.want)
		}
	}
}
