package main

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/batchclaim/batchclaim/cmd/batchclaim/internal/testbin"
	"github.com/batchclaim/batchclaim/dlt"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
	"github.com/batchclaim/batchclaim/testkit/testutil"
)

// The tests of issue 33's items 2, 3, 5 and 8 against real processes: token scopes and the
// profiles, secrets kept out of argv, ingest memory reserved as bytes arrive and probes that
// answer when the connection cap is reached, and the smaller refusals.

// withPassword is the database URL u with a password in its user info (the test server
// trusts local connections: any password does, and it must never be shown).
func withPassword(t *testing.T, u, password string) string {
	t.Helper()
	parsed, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	parsed.User = url.UserPassword(parsed.User.Username(), password)
	return parsed.String()
}

// startSim starts a ledger simulator and returns its address.
func startSim(t *testing.T, bin string) string {
	t.Helper()
	addr := mustFreeAddr(t)
	startHostile(t, bin, "dlt-sim", "--flavor", "sawtooth", "--listen", addr)
	waitHTTP(t, "http://"+addr+"/_sim/posts")
	return addr
}

// Item 2: each token may do what its scopes name, and no more: 403 naming the missing
// scope otherwise. A line without scopes (the old form) has them all, and the log says so.
// The profiles' command line shows no secret given as a flag.
func TestTokenScopes(t *testing.T) {
	t.Parallel()
	bin := testbin.Path(t)
	dir := t.TempDir()
	tokens := map[string]string{"ingest": "tok-ingest", "read": "tok-read", "operate": "tok-operate", "debug": "tok-debug", "old": "tok-old-form"}
	file := filepath.Join(dir, "tokens")
	content := "# scoped\ntok-ingest scopes=ingest\ntok-read scopes=read\ntok-operate scopes=read,operate\ntok-debug scopes=debug # profiling\ntok-old-form\n"
	if err := os.WriteFile(file, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	password, dltSecret := randomSecret(t, "pw"), randomSecret(t, "dlt")
	simAddr, addr := startSim(t, bin), mustFreeAddr(t)
	run := startHostile(t, bin, "run", "--database-url", withPassword(t, dbtest.NewDB(t), password), "--dlt-url", "http://"+simAddr,
		"--dlt-authorization", "Bearer "+dltSecret, "--listen", addr, "--auth-token-file", file, "--pprof", "--log-format", "json",
		"--renew-interval", "200ms", "--expiry-1", "3s", "--expiry-2", "12s")
	c := &hostileClient{t: t, base: "http://" + addr, http: &http.Client{Timeout: time.Minute}}
	c.waitStatus("/readyz", http.StatusOK, 30*time.Second)

	_, list := dlt.FakeBatch("svc-scopes", 0)
	requests := []struct {
		name string
		req  request
		need string
	}{
		{"POST /batches", request{method: "POST", path: "/batches?service_id=svc-scopes", contentType: octet, body: list}, "ingest"},
		{"GET /batch_statuses", request{method: "GET", path: "/batch_statuses?id=" + strings.Repeat("a", 128)}, "ingest"},
		{"GET /api/status", request{method: "GET", path: "/api/status"}, "read"},
		{"POST /api/batches/999/cancel", request{method: "POST", path: "/api/batches/999/cancel"}, "operate"},
		{"POST /api/halts/svc-scopes/resume", request{method: "POST", path: "/api/halts/svc-scopes/resume"}, "operate"},
		{"GET /debug/pprof/cmdline", request{method: "GET", path: "/debug/pprof/cmdline"}, "debug"},
		{"GET /debug/pprof/heap", request{method: "GET", path: "/debug/pprof/heap"}, "debug"},
	}
	has := map[string]string{"ingest": "ingest", "read": "read", "operate": "read,operate", "debug": "debug", "old": "ingest,read,operate,debug"}
	for _, r := range requests {
		for who, token := range tokens {
			r.req.token = token
			a := c.do(r.req)
			allowed := strings.Contains(","+has[who]+",", ","+r.need+",")
			code, _, msg := a.apiError()
			switch {
			case allowed && (a.status == http.StatusForbidden || a.status == http.StatusUnauthorized):
				t.Errorf("%s with the %s token: %d %s; its scopes allow it", r.name, who, a.status, a.body)
			case !allowed && (a.status != http.StatusForbidden || code != 83 || !strings.Contains(msg, "lacks the scope "+r.need)):
				t.Errorf("%s with the %s token: %d %s; want 403 naming the scope %s", r.name, who, a.status, a.body, r.need)
			}
		}
		r.req.token = ""
		if a := c.do(r.req); a.status != http.StatusUnauthorized {
			t.Errorf("%s without a token: %d, want 401", r.name, a.status)
		}
	}

	// The profiles' command line: the flags are named, no value is shown.
	a := c.do(request{method: "GET", path: "/debug/pprof/cmdline", token: tokens["debug"]})
	if a.status != http.StatusOK || !bytes.Contains(a.body, []byte("--database-url\x00xxxxx")) || !bytes.Contains(a.body, []byte("--dlt-authorization\x00xxxxx")) {
		t.Errorf("cmdline: %d %q; want the flags with their values masked", a.status, a.body)
	}
	for name, secret := range map[string]string{"database password": password, "ledger credential": dltSecret} {
		if bytes.Contains(a.body, []byte(secret)) {
			t.Errorf("/debug/pprof/cmdline shows the %s", name)
		}
	}
	testutil.WaitFor(t, 10*time.Second, "a warning about the token without scopes", func() bool {
		return strings.Contains(run.output(), "1 token(s) name no scopes (line 6), so each has every scope")
	})
}

// Item 3: the secrets come from files or the environment, and then are neither in ps nor
// warned about; given on the command line they work and are warned about, naming the flag
// and not the value; two forms in one place are an error, and the command line wins over the
// environment.
func TestSecretsOutOfArgv(t *testing.T) {
	t.Parallel()
	bin := testbin.Path(t)
	dir := t.TempDir()
	password, dltSecret := randomSecret(t, "pw"), randomSecret(t, "dlt")
	dbURL := withPassword(t, dbtest.NewDB(t), password)
	urlFile, authFile := filepath.Join(dir, "database-url"), filepath.Join(dir, "dlt-authorization")
	for f, v := range map[string]string{urlFile: dbURL + "\n", authFile: "Bearer " + dltSecret + "\n"} {
		if err := os.WriteFile(f, []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	simAddr := startSim(t, bin)
	secretWarning := "holds a secret, and a command line can be read by every user of the machine (ps)"

	start := func(env []string, args ...string) (*hostileProc, *hostileClient) {
		t.Helper()
		addr := mustFreeAddr(t)
		p := &hostileProc{cmd: exec.Command(bin, append([]string{"run", "--dlt-url", "http://" + simAddr, "--listen", addr,
			"--renew-interval", "200ms", "--expiry-1", "3s", "--expiry-2", "12s"}, args...)...), out: &syncWriter{w: &bytes.Buffer{}}}
		p.cmd.Env = append(os.Environ(), "DATABASE_URL=")
		p.cmd.Env = append(p.cmd.Env, env...)
		p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
		if err := p.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = p.cmd.Process.Kill()
			_ = p.cmd.Wait()
			if t.Failed() {
				t.Logf("output of run %v:\n%s", args, p.output())
			}
		})
		c := &hostileClient{t: t, base: "http://" + addr, http: &http.Client{Timeout: time.Minute}}
		c.waitStatus("/readyz", http.StatusOK, 30*time.Second)
		return p, c
	}
	cmdline := func(p *hostileProc) []byte {
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p.cmd.Process.Pid))
		if err != nil {
			t.Fatal(err)
		}
		return raw
	}

	t.Run("files", func(t *testing.T) {
		p, _ := start(nil, "--database-url-file", urlFile, "--dlt-authorization-file", authFile)
		if raw := cmdline(p); bytes.Contains(raw, []byte(password)) || bytes.Contains(raw, []byte(dltSecret)) {
			t.Errorf("a secret is in ps: %q", raw)
		}
		if strings.Contains(p.output(), secretWarning) {
			t.Errorf("warned about secrets given in files:\n%s", p.output())
		}
	})
	t.Run("environment", func(t *testing.T) {
		p, _ := start([]string{"BATCHCLAIM_DATABASE_URL=" + dbURL, "BATCHCLAIM_DLT_AUTHORIZATION=Bearer " + dltSecret})
		if raw := cmdline(p); bytes.Contains(raw, []byte(password)) || bytes.Contains(raw, []byte(dltSecret)) {
			t.Errorf("a secret is in ps: %q", raw)
		}
		if strings.Contains(p.output(), secretWarning) {
			t.Errorf("warned about secrets given in the environment:\n%s", p.output())
		}
	})
	t.Run("the environment's file forms", func(t *testing.T) {
		start([]string{"BATCHCLAIM_DATABASE_URL_FILE=" + urlFile, "BATCHCLAIM_DLT_AUTHORIZATION_FILE=" + authFile})
	})
	t.Run("the command line wins over the environment", func(t *testing.T) {
		start([]string{"BATCHCLAIM_DATABASE_URL=postgres://nobody@127.0.0.1:1/x", "BATCHCLAIM_DLT_AUTHORIZATION_FILE=" + filepath.Join(dir, "missing")},
			"--database-url-file", urlFile, "--dlt-authorization-file", authFile)
	})
	t.Run("argv, warned", func(t *testing.T) {
		p, _ := start(nil, "--database-url", dbURL, "--dlt-authorization", "Bearer "+dltSecret)
		testutil.WaitFor(t, 10*time.Second, "two warnings", func() bool {
			out := p.output()
			return strings.Contains(out, "--database-url "+secretWarning+": give it with --database-url-file FILE or in the environment (BATCHCLAIM_DATABASE_URL)") &&
				strings.Contains(out, "--dlt-authorization "+secretWarning)
		})
		if out := p.output(); strings.Contains(out, password) || strings.Contains(out, dltSecret) {
			t.Errorf("the log shows a secret:\n%s", out)
		}
	})
	t.Run("conflicts and bad files", func(t *testing.T) {
		empty := filepath.Join(dir, "empty")
		if err := os.WriteFile(empty, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			env  []string
			args []string
			want string
		}{
			{nil, []string{"--database-url", dbURL, "--database-url-file", urlFile}, "--database-url and --database-url-file: give one of them"},
			{[]string{"BATCHCLAIM_DATABASE_URL=" + dbURL, "BATCHCLAIM_DATABASE_URL_FILE=" + urlFile}, nil,
				"environment BATCHCLAIM_DATABASE_URL and environment BATCHCLAIM_DATABASE_URL_FILE: give one of them"},
			{nil, []string{"--database-url-file", empty}, "--database-url-file " + empty + ": the file is empty"},
			{[]string{"BATCHCLAIM_DLT_AUTHORIZATION_FILE=" + filepath.Join(dir, "missing")}, []string{"--database-url-file", urlFile},
				"environment BATCHCLAIM_DLT_AUTHORIZATION_FILE " + filepath.Join(dir, "missing") + ": open: no such file or directory"},
		} {
			cmd := exec.Command(bin, append([]string{"run", "--dlt-url", "http://" + simAddr}, c.args...)...)
			cmd.Env = append(append(os.Environ(), "DATABASE_URL="), c.env...)
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(string(out), c.want) || strings.Contains(string(out), password) {
				t.Errorf("%v %v: %v %q; want exit 1 and %q", c.env, c.args, err, out, c.want)
			}
		}
	})
	t.Run("every command reads the file", func(t *testing.T) {
		cmd := exec.Command(bin, "status", "--database-url-file", urlFile)
		cmd.Env = append(os.Environ(), "DATABASE_URL=")
		if out, err := cmd.CombinedOutput(); err != nil || strings.Contains(string(out), secretWarning) {
			t.Errorf("status --database-url-file: %v %s", err, out)
		}
		cmd = exec.Command(bin, "status", "--database-url", dbURL)
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "batchclaim status: warning: --database-url "+secretWarning) || strings.Contains(string(out), password) {
			t.Errorf("status --database-url with a password: %v %s; want a warning naming the flag", err, out)
		}
	})
}

// Item 5: ingest memory is reserved as bytes arrive, never from Content-Length: bodies that
// announce 256 KiB and sent one byte hold 4 KiB each, and a POST goes through; and with every
// connection of --max-connections held by slow bodies, /healthz, /readyz and /metrics still
// answer (the probes' reserve), while one more POST gets 503 code 31.
func TestIngestMemoryAndProbesUnderSlowBodies(t *testing.T) {
	t.Parallel()
	bin := testbin.Path(t)
	simAddr, addr := startSim(t, bin), mustFreeAddr(t)
	startHostile(t, bin, "run", "--database-url", dbtest.NewDB(t), "--dlt-url", "http://"+simAddr, "--listen", addr,
		"--max-body", "1048576", "--max-ingest-memory", "2097152", "--max-connections", "16",
		"--renew-interval", "200ms", "--expiry-1", "3s", "--expiry-2", "12s")
	c := &hostileClient{t: t, base: "http://" + addr, http: &http.Client{Timeout: time.Minute, Transport: &http.Transport{DisableKeepAlives: true}}}
	c.waitStatus("/readyz", http.StatusOK, 30*time.Second)
	held := 0
	// hold opens one more body that announces 256 KiB and sends one byte, and waits until the
	// instance holds it (4 KiB more in its gauge). A connection that the listener took into
	// the probes' reserve (one closing a moment late still counted against the cap) is
	// answered 503 at once: it is dialled again.
	hold := func() {
		t.Helper()
		want := float64(held+1) * 4096
		deadline := time.Now().Add(30 * time.Second)
		for {
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = conn.Close() })
			fmt.Fprintf(conn, "POST /batches?service_id=svc-slow HTTP/1.1\r\nHost: %s\r\nContent-Type: %s\r\nContent-Length: 262144\r\n\r\n\x0a", addr, octet)
			for answered := false; !answered; {
				if got := c.metric("batchclaim_ingest_memory_bytes"); got == want {
					held++
					return
				} else if got > want {
					t.Fatalf("bodies that announced 256 KiB and sent 1 byte hold %v bytes, want %v (4 KiB each)", got, want)
				}
				_ = conn.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
				n, _ := conn.Read(make([]byte, 1))
				answered = n > 0
				if time.Now().After(deadline) {
					t.Fatalf("after 30s the slow bodies hold %v bytes, want %v", c.metric("batchclaim_ingest_memory_bytes"), want)
				}
			}
			_ = conn.Close()
		}
	}

	for range 8 { // 8 x 256 KiB announced would be the whole --max-ingest-memory
		hold()
	}
	_, list := dlt.FakeBatch("svc-good", 0)
	if a := c.do(request{method: "POST", path: "/batches?service_id=svc-good", contentType: octet, body: list}); a.status != http.StatusAccepted {
		t.Fatalf("POST while 8 bodies announce 256 KiB each: %d %s", a.status, a.body)
	}

	for range 8 { // every connection of --max-connections 16 held
		hold()
	}
	for range 10 {
		for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
			if a := c.do(request{method: "GET", path: path}); a.status != http.StatusOK {
				t.Fatalf("GET %s with every connection held by slow bodies: %d %s", path, a.status, a.body)
			}
		}
	}
	a := c.do(request{method: "POST", path: "/batches?service_id=svc-good", contentType: octet, body: list})
	if code, _, _ := a.apiError(); a.status != http.StatusServiceUnavailable || code != 31 || a.header.Get("Retry-After") != "1" {
		t.Errorf("a POST beyond --max-connections: %d %s; want 503 code 31 with Retry-After", a.status, a.body)
	}
}

// Item 8: the smaller ones, each against the process that had it.
func TestSmallerRefusals(t *testing.T) {
	t.Parallel()
	bin := testbin.Path(t)
	nowhere := "postgres://x@127.0.0.1:1/x?connect_timeout=1"

	t.Run("cancel --reason empty, or too long", func(t *testing.T) {
		t.Parallel()
		for reason, want := range map[string]string{
			"":                        "--reason: give a reason",
			"  ":                      "--reason: give a reason",
			strings.Repeat("r", 1001): "--reason: 1001 bytes, at most 1000",
			"\xff\xfe":                "--reason: not valid UTF-8",
		} {
			out, err := exec.Command(bin, "cancel", "1", "--reason", reason, "--database-url", nowhere).CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(string(out), want) || strings.Contains(string(out), "cannot reach") {
				t.Errorf("cancel --reason %.20q: %v %q; want exit 1 and %q before the database", reason, err, out, want)
			}
		}
	})
	t.Run("a repeated service_id", func(t *testing.T) {
		t.Parallel()
		simAddr, addr := startSim(t, bin), mustFreeAddr(t)
		startHostile(t, bin, "run", "--database-url", dbtest.NewDB(t), "--dlt-url", "http://"+simAddr, "--listen", addr,
			"--renew-interval", "200ms", "--expiry-1", "3s", "--expiry-2", "12s", "--pprof")
		c := &hostileClient{t: t, base: "http://" + addr, http: &http.Client{Timeout: time.Minute}}
		c.waitStatus("/readyz", http.StatusOK, 30*time.Second)
		_, list := dlt.FakeBatch("svc-a", 0)
		a := c.do(request{method: "POST", path: "/batches?service_id=svc-a&service_id=svc-b", contentType: octet, body: list})
		if code, _, msg := a.apiError(); a.status != http.StatusBadRequest || code != 73 || !strings.Contains(msg, `"service_id" is given 2 times`) {
			t.Errorf("POST with service_id twice: %d %s; want 400 code 73", a.status, a.body)
		}
		if a := c.do(request{method: "GET", path: "/api/batches?service_id=svc-a&service_id=svc-b"}); a.status != http.StatusBadRequest {
			t.Errorf("the status page's batch list with service_id twice: %d %s; want 400", a.status, a.body)
		}

		// The profiles on a token-less loopback instance: a page on another site cannot start
		// one (an <img> sends Sec-Fetch-Site: cross-site); the operator's own client can.
		for _, h := range []map[string]string{{"Sec-Fetch-Site": "cross-site"}, {"Sec-Fetch-Site": "same-site"}, {"Origin": "http://evil.example"}} {
			a := c.do(request{method: "GET", path: "/debug/pprof/trace?seconds=1", headers: h})
			if code, _, _ := a.apiError(); a.status != http.StatusForbidden || code != 82 {
				t.Errorf("GET /debug/pprof/trace with %v: %d %.200s; want 403 code 82", h, a.status, a.body)
			}
		}
		if a := c.do(request{method: "GET", path: "/debug/pprof/trace?seconds=1"}); a.status != http.StatusOK {
			t.Errorf("GET /debug/pprof/trace from a client that is no browser: %d", a.status)
		}
	})
	t.Run("dlt-sim on every interface warns", func(t *testing.T) {
		t.Parallel()
		p := startHostile(t, bin, "dlt-sim", "--listen", "0.0.0.0:0")
		testutil.WaitFor(t, 10*time.Second, "a warning that the admin API is open", func() bool {
			return strings.Contains(p.output(), "level=WARN") && strings.Contains(p.output(), "its admin API (/_sim/...")
		})
	})
	t.Run("--pprof with --claims-only", func(t *testing.T) {
		t.Parallel()
		out, err := exec.Command(bin, "run", "--claims-only", "--pprof", "--database-url", nowhere).CombinedOutput()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(string(out), "--pprof is not served with --claims-only") {
			t.Errorf("run --claims-only --pprof: %v %q; want exit 1 naming both flags", err, out)
		}
	})
}
