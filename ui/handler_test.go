package ui_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batchclaim/batchclaim/claims"
	"github.com/batchclaim/batchclaim/httpauth"
	"github.com/batchclaim/batchclaim/ingest"
	"github.com/batchclaim/batchclaim/pgdb"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
	"github.com/batchclaim/batchclaim/testkit/testutil"
	"github.com/batchclaim/batchclaim/ui"
)

// bundle is a database with a little of everything the page shows, and the page's server.
type bundle struct {
	pool   *pgxpool.Pool
	srv    *httptest.Server
	alpha  *claims.Engine // holds every claim at first, then stops renewing
	beta   *claims.Engine // took alpha's claims over
	seqs   map[string][]int64
	tokens *httpauth.Tokens
	// alphaEpoch is the epoch alpha took each service_id at. Epochs come from one sequence
	// and one cycle takes its rows in no fixed order, so svc-a's is not known in advance.
	alphaEpoch map[string]int64
}

// setup stores batches for three service_ids, lets instance alpha claim them, has beta take
// them over once alpha's lease expired (by moving beta's view of the database clock), marks
// one batch COMMITTED with its transition and halts svc-c. With auth, the page's mux is
// wrapped in the bearer-token middleware, as the listener does.
func setup(t *testing.T, auth bool) *bundle {
	t.Helper()
	ctx := t.Context()
	pool := dbtest.NewPool(t)
	b := &bundle{pool: pool, seqs: map[string][]int64{}}
	for _, e := range []struct {
		svc string
		n   int
	}{{"svc-a", 3}, {"svc-b", 1}, {"svc-c", 2}} {
		for i := range e.n {
			st, err := ingest.Enqueue(ctx, pool, e.svc, e.svc+"-"+string(rune('0'+i)), []byte("x"))
			if err != nil {
				t.Fatal(err)
			}
			b.seqs[e.svc] = append(b.seqs[e.svc], st.Seq)
		}
	}
	engine := func(name string) *claims.Engine {
		e, err := claims.New(dbtest.Open(t, pool, ""), claims.Config{Name: name, Host: "test-host", RenewInterval: time.Second, Expiry1: 3 * time.Second, Expiry2: 6 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Register(ctx); err != nil {
			t.Fatal(err)
		}
		return e
	}
	b.alpha = engine("alpha")
	if _, err := b.alpha.Cycle(ctx); err != nil {
		t.Fatal(err)
	}
	b.alphaEpoch = map[string]int64{}
	for _, c := range b.alpha.Held() {
		b.alphaEpoch[c.ServiceID] = c.Epoch
	}
	if len(b.alphaEpoch) != 3 {
		t.Fatalf("alpha holds %v, want svc-a, svc-b and svc-c", b.alphaEpoch)
	}
	b.beta = engine("beta")
	b.beta.ShiftDBTime(time.Minute) // alpha's lease is long over in beta's view
	if _, err := b.beta.Cycle(ctx); err != nil {
		t.Fatal(err)
	}
	execSQL(t, pool, `UPDATE batchclaim.batches SET state = 'COMMITTED' WHERE seq = $1`, b.seqs["svc-a"][0])
	execSQL(t, pool, `INSERT INTO batchclaim.batch_transitions (seq, from_state, to_state, instance_id, epoch) VALUES ($1, 'PENDING', 'COMMITTED', $2, 1)`,
		b.seqs["svc-a"][0], b.beta.InstanceID())
	execSQL(t, pool, `INSERT INTO batchclaim.service_halts (service_id, seq, reason) VALUES ('svc-c', $1, 'batch INVALID: bad signature')`, b.seqs["svc-c"][0])

	h, err := ui.New(dbtest.Open(t, pool, ""), ui.Config{Refresh: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	h.Register(mux)
	var handler http.Handler = mux
	if auth {
		path := filepath.Join(t.TempDir(), "tokens")
		if err := os.WriteFile(path, []byte("# operators\nop-token\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if b.tokens, err = httpauth.LoadTokens(path); err != nil {
			t.Fatal(err)
		}
		handler = b.tokens.Middleware(mux)
	}
	b.srv = httptest.NewServer(handler)
	t.Cleanup(b.srv.Close)
	return b
}

func execSQL(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) {
	t.Helper()
	if _, err := pool.Exec(t.Context(), sql, args...); err != nil {
		t.Fatal(err)
	}
}

func (b *bundle) do(t *testing.T, method, path string, header map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, b.srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func (b *bundle) status(t *testing.T) ui.Status {
	t.Helper()
	var header map[string]string
	if b.tokens != nil {
		header = map[string]string{"Authorization": "Bearer op-token"}
	}
	code, body := b.do(t, "GET", "/api/status", header)
	if code != http.StatusOK {
		t.Fatalf("GET /api/status: %d %s", code, body)
	}
	var st ui.Status
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatalf("decode status: %v\n%s", err, body)
	}
	return st
}

// halted reads the halts through the API, polling past the reuse of recent answers.
func (b *bundle) halted(t *testing.T, want int) ui.Status {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st := b.status(t)
		if len(st.Halted) == want || time.Now().After(deadline) {
			return st
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestStatusAPI(t *testing.T) {
	t.Parallel()
	b := setup(t, false)
	st := b.status(t)

	if len(st.Instances) != 2 {
		t.Fatalf("instances: %+v", st.Instances)
	}
	byName := map[string]claims.InstanceStatus{}
	for _, i := range st.Instances {
		byName[i.Name] = i
	}
	if a, bb := byName["alpha"], byName["beta"]; a.Claims != 0 || bb.Claims != 3 || bb.Phase != "live" || bb.Host != "test-host" {
		t.Errorf("claims after the takeover: alpha %d, beta %d (%s on %q); want 0 and 3, beta live", a.Claims, bb.Claims, bb.Phase, bb.Host)
	}
	if st.ServiceIDs != 3 || st.Unclaimed != 0 || st.FairShare < 2 {
		t.Errorf("service_ids %d unclaimed %d fair share %d; want 3, 0, at least 2", st.ServiceIDs, st.Unclaimed, st.FairShare)
	}

	if st.Open.Total != 5 || st.Open.ByState["NEW"] != 5 || st.Open.ServiceCount != 3 {
		t.Errorf("open batches: %+v; want 5 NEW over 3 service_ids", st.Open)
	}
	for i := 1; i < len(st.Open.Services); i++ {
		if st.Open.Services[i-1].OldestSeconds < st.Open.Services[i].OldestSeconds {
			t.Errorf("service_ids not oldest first: %+v", st.Open.Services)
		}
	}
	if len(st.Open.Services) > 0 && st.Open.Services[0].Owner != "beta" {
		t.Errorf("owner of %s: %q, want beta", st.Open.Services[0].ServiceID, st.Open.Services[0].Owner)
	}

	if len(st.Halted) != 1 || st.Halted[0].ServiceID != "svc-c" || st.Halted[0].Seq != b.seqs["svc-c"][0] {
		t.Errorf("halted: %+v", st.Halted)
	}

	if st.Chart.Totals["COMMITTED"] != 1 || len(st.Chart.Counts["COMMITTED"]) != ui.BucketsDefault {
		t.Errorf("chart: totals %v, %d buckets", st.Chart.Totals, len(st.Chart.Counts["COMMITTED"]))
	} else if last := st.Chart.Counts["COMMITTED"][ui.BucketsDefault-1]; last != 1 {
		t.Errorf("the commit just now is not in the newest bucket: %v", st.Chart.Counts["COMMITTED"])
	}
	if len(st.Transitions) != 1 || st.Transitions[0].To != "COMMITTED" || st.Transitions[0].Instance != "beta" || st.Transitions[0].ServiceID != "svc-a" {
		t.Errorf("transitions: %+v", st.Transitions)
	}

	if len(st.Takeovers) != 3 {
		t.Fatalf("takeovers: %+v; want alpha's 3 claims", st.Takeovers)
	}
	for _, tk := range st.Takeovers {
		if tk.From != "alpha" || tk.To != "beta" || tk.Event != "voided_expired" || tk.AcquiredAfterSeconds < 0 {
			t.Errorf("takeover %+v: want voided_expired from alpha, acquired by beta", tk)
		}
	}
}

func TestResume(t *testing.T) {
	t.Parallel()
	b := setup(t, false)
	if st := b.halted(t, 1); len(st.Halted) != 1 {
		t.Fatalf("halted before: %+v", st.Halted)
	}

	code, body := b.do(t, "POST", "/api/halts/svc-c/resume", map[string]string{"Origin": "http://evil.example"})
	if code != http.StatusForbidden {
		t.Errorf("cross-origin resume: %d %s, want 403", code, body)
	}
	if st := b.halted(t, 1); len(st.Halted) != 1 {
		t.Fatalf("a refused resume lifted the halt: %+v", st.Halted)
	}

	code, body = b.do(t, "POST", "/api/halts/svc-c/resume", map[string]string{"Origin": b.srv.URL})
	if code != http.StatusOK || !strings.Contains(body, `"service_id":"svc-c"`) || !strings.Contains(body, "bad signature") {
		t.Fatalf("resume: %d %s", code, body)
	}
	if st := b.halted(t, 0); len(st.Halted) != 0 {
		t.Errorf("still halted after resume: %+v", st.Halted)
	}
	var n int
	if err := b.pool.QueryRow(t.Context(), `SELECT count(*) FROM batchclaim.service_halts`).Scan(&n); err != nil || n != 0 {
		t.Errorf("service_halts rows: %d (%v)", n, err)
	}

	code, body = b.do(t, "POST", "/api/halts/svc-c/resume", nil)
	if code != http.StatusNotFound || !strings.Contains(body, "not halted") {
		t.Errorf("resume of a service_id that is not halted: %d %s, want 404", code, body)
	}
	for _, id := range []string{"%FF%FE", "svc%00", "svc%C2%9B", "svc%E2%80%AE", "svc%E2%80%8B"} {
		code, body = b.do(t, "POST", "/api/halts/"+id+"/resume", nil)
		if code != http.StatusBadRequest || !strings.Contains(body, "bad service_id") {
			t.Errorf("resume of %s: %d %s, want 400", id, code, body)
		}
	}
}

// Behind the listener's token middleware the page and its assets stay readable; its data,
// which names service_ids and batch ids, needs a bearer token as the ingest API does, and so
// does resume.
func TestResumeNeedsTokenBehindAuth(t *testing.T) {
	t.Parallel()
	b := setup(t, true)
	for _, path := range []string{"/", "/assets/app.js", "/assets/style.css"} {
		if code, body := b.do(t, "GET", path, nil); code != http.StatusOK {
			t.Errorf("GET %s without a token: %d %s", path, code, body)
		}
	}
	if code, body := b.do(t, "GET", "/api/status", nil); code != http.StatusUnauthorized || strings.Contains(body, "svc-") {
		t.Errorf("GET /api/status without a token: %d %s, want 401", code, body)
	}
	if st := b.status(t); len(st.Open.Services) == 0 {
		t.Errorf("GET /api/status with the token lists no service_id: %+v", st.Open)
	}
	for _, auth := range []string{"", "Bearer wrong"} {
		h := map[string]string{}
		if auth != "" {
			h["Authorization"] = auth
		}
		if code, body := b.do(t, "POST", "/api/halts/svc-c/resume", h); code != http.StatusUnauthorized {
			t.Errorf("resume with %q: %d %s, want 401", auth, code, body)
		}
	}
	if st := b.halted(t, 1); len(st.Halted) != 1 {
		t.Fatalf("an unauthenticated resume lifted the halt: %+v", st.Halted)
	}
	if code, body := b.do(t, "POST", "/api/halts/svc-c/resume", map[string]string{"Authorization": "Bearer op-token"}); code != http.StatusOK {
		t.Errorf("resume with the token: %d %s", code, body)
	}
}

func TestPageAndAssets(t *testing.T) {
	t.Parallel()
	b := setup(t, false)
	for _, c := range []struct {
		path, contentType, contains string
		code                        int
	}{
		{"/", "text/html", `data-refresh-ms="200"`, 200},
		{"/assets/app.js", "javascript", "/api/status", 200},
		{"/assets/style.css", "text/css", ".tiles", 200},
		{"/assets/index.html", "", "", 404}, // the template only through /
		{"/assets/nope.js", "", "", 404},
		{"/elsewhere", "", "", 404}, // / is the page, not a catch-all
	} {
		req, _ := http.NewRequest("GET", b.srv.URL+c.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.code {
			t.Errorf("GET %s: %d, want %d", c.path, resp.StatusCode, c.code)
			continue
		}
		if !strings.Contains(resp.Header.Get("Content-Type"), c.contentType) || !strings.Contains(string(body), c.contains) {
			t.Errorf("GET %s: %s, body lacks %q", c.path, resp.Header.Get("Content-Type"), c.contains)
		}
	}
	// Nothing is loaded from elsewhere: the page works offline, and says so to the browser.
	resp, err := http.Get(b.srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") || !strings.Contains(csp, "frame-ancestors 'none'") {
		t.Errorf("Content-Security-Policy %q", csp)
	}
	_, page := b.do(t, "GET", "/", nil)
	for _, bad := range []string{"http://", "https://", "//cdn"} {
		if strings.Contains(page, bad) {
			t.Errorf("the page refers to %q", bad)
		}
	}
}

func TestConfigValidation(t *testing.T) {
	t.Parallel()
	db := dbtest.Open(t, &pgxpool.Pool{}, "") // never used: New does no I/O
	for _, c := range []struct {
		name string
		cfg  ui.Config
		want string
	}{
		{"zero is the defaults", ui.Config{}, ""},
		{"refresh too short", ui.Config{Refresh: 50 * time.Millisecond}, "under 100ms"},
		{"negative recent", ui.Config{Recent: -1}, "must be positive"},
		{"buckets under a second", ui.Config{Window: 10 * time.Second, Buckets: 20}, "under a second"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ui.New(db, c.cfg)
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("unexpected error %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("error %v, want one saying %q", err, c.want)
			}
		})
	}
	if _, err := ui.New(pgdb.DB{}, ui.Config{}); err == nil {
		t.Error("the zero DB was accepted")
	}
}

// While the database cannot be read the status API answers 503 without naming the database,
// and logs the failure once in full, not once per request (the rest are counted); its
// recovery is logged once too.
func TestStatusDuringOutage(t *testing.T) {
	t.Parallel()
	rawURL := dbtest.NewDB(t)
	dbURL, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	proxy, viaProxy := dbtest.Proxied(t, rawURL)
	pool, err := pgxpool.New(context.Background(), viaProxy+"&connect_timeout=2")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	var logs testutil.SyncBuffer
	h, err := ui.New(dbtest.Open(t, pool, ""), ui.Config{Refresh: 100 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	h.Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	get := func() (int, string) {
		resp, err := http.Get(srv.URL + "/api/status")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get(); code != http.StatusOK {
		t.Fatalf("before the outage: %d %s", code, body)
	}
	proxy.Cut()
	testutil.WaitFor(t, 10*time.Second, "the reused answer gone", func() bool { code, _ := get(); return code == http.StatusServiceUnavailable })
	for range 10 {
		code, body := get()
		if code != http.StatusServiceUnavailable {
			t.Fatalf("during the outage: %d %s", code, body)
		}
		for _, secret := range []string{dbURL.User.Username(), strings.TrimPrefix(dbURL.Path, "/"), proxy.Addr()} {
			if strings.Contains(body, secret) {
				t.Fatalf("the 503 names %q: %s", secret, body)
			}
		}
	}
	proxy.Restore()
	testutil.WaitFor(t, 10*time.Second, "the status read again", func() bool { code, _ := get(); return code == http.StatusOK })
	// The first failure is logged, the others counted in one line when reads work again.
	first := strings.Count(logs.String(), `msg="status page: the database cannot be read" `)
	warn, info := strings.Count(logs.String(), "level=WARN"), strings.Count(logs.String(), "can be read again")
	if first != 1 || warn > 2 || info != 1 {
		t.Errorf("10 failed reads and a recovery logged %d warnings (%d in full) and %d recoveries, want 1 in full, at most 1 count, and 1 recovery:\n%s",
			warn, first, info, logs.String())
	}
}

// A query parameter given twice is refused, naming it: service_id=a&service_id=b names two
// keys, and taking the first would be a guess.
func TestRepeatedQueryParameter(t *testing.T) {
	t.Parallel()
	b := setup(t, false)
	b.wantCode(t, http.StatusBadRequest, map[string]string{
		"/api/batches?service_id=svc-a&service_id=svc-b": `the query parameter \"service_id\" is given 2 times`,
		"/api/batches?service_id=svc-a&service_id=svc-a": `the query parameter \"service_id\" is given 2 times`,
		"/api/search?q=svc-a&q=svc-b":                    `the query parameter \"q\" is given 2 times`,
		"/api/services/svc-a?limit=1&limit=1000":         `the query parameter \"limit\" is given 2 times`,
	})
	if code, body := b.do(t, "GET", "/api/batches?service_id=svc-a", nil); code != http.StatusOK {
		t.Errorf("one service_id: %d %s", code, body)
	}
}
