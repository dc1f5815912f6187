package ui_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batchclaim/batchclaim/claims"
	"github.com/batchclaim/batchclaim/dlt"
	"github.com/batchclaim/batchclaim/dlt/dltsim"
	"github.com/batchclaim/batchclaim/httpauth"
	"github.com/batchclaim/batchclaim/ingest"
	"github.com/batchclaim/batchclaim/node"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
	"github.com/batchclaim/batchclaim/testkit/testutil"
)

// The page in a real browser: two running instances appear with their claims, the page
// redraws by itself, and its numbers move when batches commit. A screenshot is kept in
// $ARTIFACTS_DIR (else a new directory under the system's temp dir) and its path logged.
// Chromium runs twice, reading the DOM it rendered (--dump-dom) after a few seconds of the
// page's own virtual time: before any batch, and after every batch committed. In the first
// run a small script added to the page presses Resume on the halted service_id, first with
// no token (the listener requires one: the page must say 401) and then with the token typed
// into the page's token field.
// Without a Chromium binary the test skips, unless REQUIRE_BROWSER=1.
func TestPageInBrowser(t *testing.T) {
	browser := findBrowser()
	if browser == "" {
		if os.Getenv("REQUIRE_BROWSER") == "1" {
			t.Fatal("REQUIRE_BROWSER=1 but no chromium binary was found (apt-get install chromium)")
		}
		t.Skip("no chromium binary found; set REQUIRE_BROWSER=1 to make this a failure")
	}
	t.Parallel()
	ctx := t.Context()
	pool, err := pgxpool.New(ctx, dbtest.NewDB(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	sim, err := dltsim.New(dltsim.Config{CommitLatency: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	simURL, err := sim.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sim.Close() })

	// An instance that claims everything and then dies: the others take its claims over.
	services := []string{"svc-a", "svc-b", "svc-c", "svc-d", "svc-e", "svc-f", "svc-halted", oddService}
	if err := claims.RegisterServiceIDs(ctx, pool, services...); err != nil {
		t.Fatal(err)
	}
	ghost, err := claims.New(dbtest.Open(t, pool, ""), testTimings("node-gone"))
	if err != nil {
		t.Fatal(err)
	}
	if err := ghost.Register(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := ghost.Cycle(ctx); err != nil {
		t.Fatal(err)
	}
	id, list := dlt.FakeBatch("svc-halted", 0)
	st, err := ingest.Enqueue(ctx, pool, "svc-halted", id, list)
	if err != nil {
		t.Fatal(err)
	}
	halt := func() {
		execSQL(t, pool, `INSERT INTO batchclaim.service_halts (service_id, seq, reason) VALUES ('svc-halted', $1, 'batch INVALID: signature check failed')`, st.Seq)
	}
	halt()

	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte("op-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	auth, err := httpauth.LoadTokens(tokens)
	if err != nil {
		t.Fatal(err)
	}
	a := startNode(t, pool, simURL, "node-a", auth.Middleware)
	b := startNode(t, pool, simURL, "node-b", nil)
	testutil.WaitFor(t, 20*time.Second, "the dead instance's claims taken over", func() bool {
		var held int
		err := pool.QueryRow(ctx, `SELECT count(*) FROM batchclaim.service_id_claims c JOIN batchclaim.instances i ON i.id = c.claimant WHERE i.name <> 'node-gone'`).Scan(&held)
		return err == nil && held == len(services)
	})
	page := "http://" + b.Addr() + "/" // without tokens: the page reads its data without one

	before := dumpDOM(t, browser, withScript(t, a.Addr(), pressResume))
	for _, name := range []string{"node-a", "node-b", "node-gone"} {
		if !regexp.MustCompile(`<tr data-instance="` + name + `">`).MatchString(before) {
			t.Errorf("instance %s is not in the instances table", name)
		}
	}
	if r := intOf(t, before, `data-renders="(\d+)"`); r < 2 {
		t.Errorf("the page rendered %d times in its first seconds; it should poll and redraw by itself", r)
	}
	if c := intOf(t, before, `data-committed-before="(\d+)"`); c != 0 {
		t.Errorf("committed before any batch: %d", c)
	}
	held := 0
	for _, m := range regexp.MustCompile(`data-claims="(\d+)"`).FindAllStringSubmatch(before, -1) {
		k, _ := strconv.Atoi(m[1])
		held += k
	}
	if held != len(services) {
		t.Errorf("the claim bars add up to %d, want %d", held, len(services))
	}
	if !regexp.MustCompile(`data-halted-seen="svc-halted"`).MatchString(before) {
		t.Error("the halted service_id was not listed with a Resume button")
	}
	if m := regexp.MustCompile(`data-status-without-token="([^"]*)"`).FindStringSubmatch(before); m == nil || !strings.Contains(m[1], "401: this server shows its status to operators only; enter a token") {
		t.Errorf("the status without a token: the page said %q, want a 401 message", m)
	}
	if m := regexp.MustCompile(`data-without-token="([^"]*)"`).FindStringSubmatch(before); m == nil || !regexp.MustCompile(`^401 Unauthorized.*No token is saved`).MatchString(m[1]) {
		t.Errorf("resume without a token: the page said %q, want a 401 message", m)
	}
	if m := regexp.MustCompile(`data-with-token="([^"]*)"`).FindStringSubmatch(before); m == nil || m[1] != "Resumed svc-halted." {
		t.Errorf("resume with the token: the page said %q", m)
	}
	// Resumed, its batch commits; halt it again so that the screenshot shows a halt.
	testutil.WaitFor(t, 30*time.Second, "the resumed service_id's batch committed", func() bool {
		var state string
		err := pool.QueryRow(ctx, `SELECT state FROM batchclaim.batches WHERE seq = $1`, st.Seq).Scan(&state)
		return err == nil && state == "COMMITTED"
	})
	halt()

	const perService = 4
	for b := range perService {
		for _, svc := range services[:6] {
			id, list := dlt.FakeBatch(svc, b)
			if _, err := ingest.Enqueue(ctx, pool, svc, id, list); err != nil {
				t.Fatal(err)
			}
		}
	}
	want := 6*perService + 1
	testutil.WaitFor(t, 60*time.Second, "every batch committed", func() bool {
		var n int
		err := pool.QueryRow(ctx, `SELECT count(*) FROM batchclaim.batches WHERE state = 'COMMITTED'`).Scan(&n)
		return err == nil && n == want
	})

	dir := os.Getenv("ARTIFACTS_DIR")
	if dir == "" {
		if dir, err = os.MkdirTemp("", "batchclaim-ui-"); err != nil {
			t.Fatal(err)
		}
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	shot := filepath.Join(dir, "status-page.png")
	after := runBrowser(t, browser, "--dump-dom", "--virtual-time-budget=5000", "--screenshot="+shot, "--window-size=1280,900", page)
	if fi, err := os.Stat(shot); err != nil || fi.Size() < 10_000 {
		t.Errorf("screenshot %s: %v", shot, err)
	} else {
		t.Logf("screenshot: %s", shot)
		fmt.Fprintf(os.Stderr, "status page screenshot: %s\n", shot)
	}
	if c := intOf(t, after, `id="t-committed">(\d+)<`); c != want {
		t.Errorf("committed after the batches: %d, want %d", c, want)
	}
	if o := intOf(t, after, `id="t-open">(\d+)<`); o != 0 {
		t.Errorf("unfinished batches: %d, want none", o)
	}
	if !regexp.MustCompile(`<tr data-service="svc-halted">`).MatchString(after) {
		t.Error("the halted service_id is not listed")
	}
	if !regexp.MustCompile(`<rect [^>]*fill="[^"]+"`).MatchString(after) {
		t.Error("the chart has no bars after the commits")
	}
	if !regexp.MustCompile(`<a href="#/batch/\d+" title="[0-9a-f]{128}" class="batch-link"`).MatchString(after) {
		t.Error("the recent transitions do not link their batches' pages with the full batch id")
	}

	checkJobView(t, browser, page, dir, pool)

	// Behind the token: search for the halted service_id, resume it from its page, then list
	// svc-a's committed batches.
	pressed := dumpDOM(t, browser, withScript(t, a.Addr(), resumeFromServicePage))
	if m := regexp.MustCompile(`data-search-landed="([^"]*)"`).FindStringSubmatch(pressed); m == nil || m[1] != "svc-halted" {
		t.Errorf("the search for svc-hal landed on %q, want svc-halted's page", m)
	}
	if m := regexp.MustCompile(`data-resumed-from-page="([^"]*)"`).FindStringSubmatch(pressed); m == nil || m[1] != "Resumed svc-halted." {
		t.Errorf("resume from the service_id page: the page said %q", m)
	}
	var halts int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM batchclaim.service_halts`).Scan(&halts); err != nil || halts != 0 {
		t.Errorf("halts after the resume from the service_id page: %d (%v)", halts, err)
	}
	if n := intOf(t, pressed, `data-listed="(\d+)"`); n != perService {
		t.Errorf("svc-a's committed batches listed: %d, want %d", n, perService)
	}

	// A batch due an hour from now: cancel it from its page, then retry it there; it runs.
	id, list = dlt.FakeBatch("svc-later", 0)
	later, err := ingest.Enqueue(ctx, pool, "svc-later", id, list, ingest.RunAt(time.Now().Add(time.Hour)))
	if err != nil {
		t.Fatal(err)
	}
	acted := dumpDOM(t, browser, withScript(t, a.Addr(), strings.ReplaceAll(cancelThenRetry, "SEQ", strconv.FormatInt(later.Seq, 10))))
	if m := regexp.MustCompile(`data-cancelled="([^"]*)"`).FindStringSubmatch(acted); m == nil || m[1] != fmt.Sprintf("Batch #%d: NEW → CANCELLED.", later.Seq) {
		t.Errorf("cancel from the batch page: the page said %q", m)
	}
	if m := regexp.MustCompile(`data-retried="([^"]*)"`).FindStringSubmatch(acted); m == nil || m[1] != fmt.Sprintf("Batch #%d: CANCELLED → NEW.", later.Seq) {
		t.Errorf("retry from the batch page: the page said %q", m)
	}
	testutil.WaitFor(t, 30*time.Second, "the batch retried from its page committed", func() bool {
		var state string
		err := pool.QueryRow(ctx, `SELECT state FROM batchclaim.batches WHERE seq = $1`, later.Seq).Scan(&state)
		return err == nil && state == "COMMITTED"
	})
}

// cancelThenRetry runs in the page of an instance that requires a token: it opens batch SEQ's
// page, presses Cancel, then Retry on the page shown again, keeping each banner in <body>.
const cancelThenRetry = `(async function () {
  const until = (cond) => new Promise((done) => { const i = setInterval(() => { if (cond()) { clearInterval(i); done(); } }, 20); });
  window.confirm = () => true;
  sessionStorage.setItem("batchclaim.token", "op-token");
  const banner = () => document.getElementById("banner").textContent;
  location.hash = "#/batch/SEQ";
  await until(() => document.getElementById("batch-cancel"));
  document.getElementById("batch-cancel").click();
  await until(() => banner().startsWith("Batch #") && document.getElementById("batch-retry"));
  document.body.dataset.cancelled = banner();
  document.getElementById("batch-retry").click();
  await until(() => banner().includes("→ NEW"));
  document.body.dataset.retried = banner();
})();`

// resumeFromServicePage runs in the page of an instance that requires a token: it saves the
// token, searches for "svc-hal" (one match: the page opens svc-halted's page), presses
// Resume there, then filters the batch list, keeping what it saw in attributes of <body>.
const resumeFromServicePage = `(async function () {
  const until = (cond) => new Promise((done) => { const i = setInterval(() => { if (cond()) { clearInterval(i); done(); } }, 20); });
  window.confirm = () => true;
  sessionStorage.setItem("batchclaim.token", "op-token");
  document.getElementById("search").value = "svc-hal";
  document.getElementById("search-form").requestSubmit();
  await until(() => document.getElementById("service-resume"));
  document.body.dataset.searchLanded = document.getElementById("service-id").textContent;
  document.getElementById("service-resume").click();
  await until(() => document.getElementById("banner").textContent.startsWith("Resumed"));
  document.body.dataset.resumedFromPage = document.getElementById("banner").textContent;
  location.hash = "#/batches?state=COMMITTED&service_id=svc-a&window=10m";
  await until(() => document.body.dataset.view === "batches");
  document.body.dataset.listed = String(document.querySelectorAll("#batch-list tbody tr").length);
})();`

// oddService is a service_id with characters that mean something in HTML and in URLs.
const oddService = `svc/<b>odd</b>&"x%`

// checkJobView opens a service_id's page, a batch's page and a halted service_id's page in
// Chromium, checks what they show and keeps a screenshot of each in dir.
func checkJobView(t *testing.T, browser, page, dir string, pool *pgxpool.Pool) {
	t.Helper()
	ctx := t.Context()
	var seq int64
	var batchID, owner string
	err := pool.QueryRow(ctx, `SELECT b.seq, b.batch_id, i.name FROM batchclaim.batches b, batchclaim.service_id_claims c JOIN batchclaim.instances i ON i.id = c.claimant
		WHERE b.service_id = 'svc-a' AND c.service_id = 'svc-a' ORDER BY b.seq DESC LIMIT 1`).Scan(&seq, &batchID, &owner)
	if err != nil {
		t.Fatal(err)
	}
	open := func(fragment, shot string) string {
		t.Helper()
		path := filepath.Join(dir, shot)
		dom := runBrowser(t, browser, "--dump-dom", "--virtual-time-budget=5000", "--screenshot="+path, "--window-size=1280,900", page+fragment)
		if fi, err := os.Stat(path); err != nil || fi.Size() < 10_000 {
			t.Errorf("screenshot %s: %v", path, err)
		} else {
			t.Logf("screenshot: %s", path)
		}
		return dom
	}
	cell := func(dom, table string) []string { // the text of each row of a table
		m := regexp.MustCompile(`(?s)<table id="` + table + `">.*?<tbody>(.*?)</tbody>`).FindStringSubmatch(dom)
		if m == nil {
			t.Fatalf("no table %s in the page", table)
		}
		var rows []string
		for _, r := range regexp.MustCompile(`(?s)<tr[^>]*>(.*?)</tr>`).FindAllStringSubmatch(m[1], -1) {
			rows = append(rows, regexp.MustCompile(`(<[^>]+>)+`).ReplaceAllString(r[1], "|"))
		}
		return rows
	}

	svc := open("#/service/svc-a", "service-page.png")
	if !strings.Contains(svc, `data-view="service"`) {
		t.Error("the service_id page was not shown")
	}
	if !strings.Contains(svc, `id="service-id">svc-a<`) || !strings.Contains(svc, "<dd>"+owner+"</dd>") {
		t.Errorf("the service_id page does not name svc-a and its owner %s", owner)
	}
	if q := cell(svc, "queue"); len(q) != 1 || !strings.Contains(q[0], "no unfinished batch") {
		t.Errorf("the queue of svc-a after every batch committed: %q", q)
	}
	acquired := 0
	for _, r := range cell(svc, "ownership") {
		if strings.Contains(r, "|acquired|") {
			acquired++
		}
	}
	if acquired < 2 {
		t.Errorf("svc-a's owner history shows %d acquisitions, want the dead instance's and its successor's: %q", acquired, cell(svc, "ownership"))
	}

	bp := open(fmt.Sprintf("#/batch/%d", seq), "batch-page.png")
	if !strings.Contains(bp, `id="batch-id">`+batchID+`<`) {
		t.Errorf("the batch page does not show the full batch id %s", batchID)
	}
	if !strings.Contains(bp, "<dt>attempts</dt><dd>1</dd>") {
		t.Error("the batch page does not count its one attempt")
	}
	attempts := cell(bp, "attempts")
	if len(attempts) == 0 || !regexp.MustCompile(`^\|1\|.*\|node-[ab]\|\d+\|first\|202\|[0-9.]+ ms\|`).MatchString(attempts[len(attempts)-1]) {
		t.Errorf("the batch's first attempt: %q; want number 1 by node-a or node-b, HTTP 202 and a latency", attempts)
	}
	changes := strings.Join(cell(bp, "batch-transitions"), "\n")
	for _, want := range []string{"NEW → |INFLIGHT", "INFLIGHT → |PENDING", "→ |COMMITTED"} {
		if !strings.Contains(changes, want) {
			t.Errorf("the batch's transitions lack %q:\n%s", want, changes)
		}
	}

	halted := open("#/service/svc-halted", "halted-service-page.png")
	if !strings.Contains(halted, `id="service-resume"`) || !strings.Contains(halted, "batch INVALID: signature check failed") {
		t.Error("the halted service_id's page shows no halt with a Resume button")
	}

	// Odd characters show as text: no element comes from a service_id.
	odd := runBrowser(t, browser, "--dump-dom", "--virtual-time-budget=5000", page+"#/service/"+url.PathEscape(oddService))
	if !strings.Contains(odd, `id="service-id">svc/&lt;b&gt;odd&lt;/b&gt;&amp;"x%<`) || strings.Contains(odd, "<b>odd</b>") {
		t.Errorf("the odd service_id's page: %s", regexp.MustCompile(`(?s)<main id="job".*?</main>`).FindString(odd))
	}
}

func findBrowser() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "chrome", "headless_shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// runBrowser runs headless Chromium once with a throwaway profile and returns its stdout.
func runBrowser(t *testing.T, browser string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute) // a loaded machine starts it slowly
	defer cancel()
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--disable-dev-shm-usage", "--user-data-dir=" + t.TempDir()}
	cmd := exec.CommandContext(ctx, browser, append(base, args...)...)
	var stderr limitedBuffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s", browser, err, stderr.String())
	}
	return string(out)
}

// dumpDOM loads url, lets the page run for a few seconds of its own (virtual) time, and
// returns the DOM as rendered.
func dumpDOM(t *testing.T, browser, url string) string {
	t.Helper()
	return runBrowser(t, browser, "--dump-dom", "--virtual-time-budget=5000", url)
}

func intOf(t *testing.T, dom, pattern string) int {
	t.Helper()
	m := regexp.MustCompile(pattern).FindStringSubmatch(dom)
	if m == nil {
		t.Fatalf("the rendered page has no match for %s", pattern)
	}
	n, err := strconv.Atoi(m[1])
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// testTimings: R = 250ms, T1 = 3s, T2 = 12s: short, with room for a loaded machine (two
// browsers and the race detector) to renew in time.
func testTimings(name string) claims.Config {
	return claims.Config{Name: name, RenewInterval: 250 * time.Millisecond, Expiry1: 3 * time.Second, Expiry2: 12 * time.Second}
}

// pressResume runs in the page: the listener requires a token to read the status, so it
// waits for the page to say so, types the token into the page's field and saves it; once
// the halted service_id shows, it clears the token, presses Resume without one, then types
// the token again and presses Resume again, keeping what the page said each time in
// attributes of <body>.
const pressResume = `(async function () {
  const until = (cond) => new Promise((done) => { const i = setInterval(() => { if (cond()) { clearInterval(i); done(); } }, 20); });
  const banner = document.getElementById("banner");
  const conn = document.getElementById("conn");
  const button = () => document.querySelector("#halted tr[data-service] button");
  window.confirm = () => true;
  sessionStorage.clear();
  await until(() => conn.textContent.includes("401"));
  document.body.dataset.statusWithoutToken = conn.textContent;
  document.getElementById("token").value = "op-token";
  document.getElementById("token-form").requestSubmit();
  await until(button);
  document.getElementById("token-clear").click();
  document.body.dataset.haltedSeen = button().closest("tr").dataset.service;
  document.body.dataset.committedBefore = document.getElementById("t-committed").textContent;
  button().click();
  await until(() => !banner.hidden && banner.textContent.startsWith("401"));
  document.body.dataset.withoutToken = banner.textContent;
  document.getElementById("token").value = "op-token";
  document.getElementById("token-form").requestSubmit();
  button().click();
  await until(() => banner.textContent.startsWith("Resumed"));
  document.body.dataset.withToken = banner.textContent;
})();`

// withScript serves the instance's page with script added, and everything else from the
// instance, on one origin (the page's requests go where a browser would send them), and
// returns the page's URL.
func withScript(t *testing.T, addr, script string) string {
	t.Helper()
	target := &url.URL{Scheme: "http", Host: addr}
	proxy := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			proxy.ServeHTTP(w, r)
			return
		}
		resp, err := http.Get(target.String() + "/")
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		page, _ := io.ReadAll(resp.Body)
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte(strings.Replace(string(page), "</body>", "<script>"+script+"</script></body>", 1)))
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/"
}

func startNode(t *testing.T, pool *pgxpool.Pool, simURL, name string, auth func(http.Handler) http.Handler) *node.Node {
	t.Helper()
	client, err := dlt.NewClient(dlt.Config{Flavor: dlt.FlavorSawtooth, URL: simURL, RequestTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	n, err := node.New(dbtest.Open(t, pool, ""), node.Config{
		Claims: testTimings(name), Submitter: client, Statuses: client,
		Workers: 4, PollInterval: 50 * time.Millisecond, Listen: "127.0.0.1:0", Auth: auth,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("%s stopped with %v", name, err)
		}
	})
	testutil.WaitFor(t, 10*time.Second, name+" listening", func() bool { return n.Addr() != "" })
	return n
}

// limitedBuffer keeps the last 8 KiB written to it (Chromium is chatty on stderr).
type limitedBuffer struct{ b []byte }

func (l *limitedBuffer) Write(p []byte) (int, error) {
	l.b = append(l.b, p...)
	if len(l.b) > 8<<10 {
		l.b = l.b[len(l.b)-8<<10:]
	}
	return len(p), nil
}

func (l *limitedBuffer) String() string { return string(l.b) }
