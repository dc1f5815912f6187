package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/batchclaim/batchclaim/cmd/batchclaim/internal/testbin"
	"github.com/batchclaim/batchclaim/dlt"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
	"github.com/batchclaim/batchclaim/testkit/testcert"
)

func TestLoopbackOnly(t *testing.T) {
	t.Parallel()
	for addr, want := range map[string]bool{
		"127.0.0.1:8080": true, "127.0.0.2:80": true, "[::1]:8080": true, "localhost:8080": true,
		":8080": false, "0.0.0.0:8080": false, "[::]:8080": false, "10.0.0.5:8080": false,
		"db.example:8080": false, "nonsense": false,
	} {
		if got := loopbackOnly(addr); got != want {
			t.Errorf("loopbackOnly(%q) = %v, want %v", addr, got, want)
		}
	}
}

// run refuses a reachable listener without a token file, and says how to fix it.
func TestRunRefusesOpenListener(t *testing.T) {
	t.Parallel()
	base := []string{"run", "--database-url", "postgres://x@127.0.0.1:1/x", "--dlt-url", "http://127.0.0.1:1"}
	var stdout, stderr bytes.Buffer
	code := realMain(t.Context(), append(base, "--listen", "0.0.0.0:0"), &stdout, &stderr)
	want := "batchclaim run: --listen 0.0.0.0:0 is not a loopback address and no --auth-token-file is set, so anyone who can reach it could post batches: " +
		"give --auth-token-file FILE, or --insecure-listen if something in front of it authenticates\n"
	if code != 1 || stderr.String() != want {
		t.Fatalf("exit %d, stderr %q; want exit 1 and %q", code, stderr.String(), want)
	}
	// With --insecure-listen the check passes and run goes on to the database (unreachable here).
	stderr.Reset()
	code = realMain(t.Context(), append(base, "--listen", "0.0.0.0:0", "--insecure-listen"), &stdout, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), "cannot reach database") {
		t.Fatalf("--insecure-listen: exit %d, stderr %q; want the database error", code, stderr.String())
	}
}

func TestVersionCommand(t *testing.T) {
	t.Parallel()
	var stdout, stderr bytes.Buffer
	if code := realMain(t.Context(), []string{"version"}, &stdout, &stderr); code != 0 {
		t.Fatalf("version: exit %d %s", code, stderr.String())
	}
	if !strings.HasPrefix(stdout.String(), "batchclaim "+release) || !strings.Contains(stdout.String(), "\nmodule  ") {
		t.Errorf("version printed %q", stdout.String())
	}
	stdout.Reset()
	if code := realMain(t.Context(), []string{"version", "--json"}, &stdout, &stderr); code != 0 {
		t.Fatalf("version --json: exit %d %s", code, stderr.String())
	}
	var v versionInfo
	if err := json.Unmarshal(stdout.Bytes(), &v); err != nil || v.Release != release || v.Go == "" {
		t.Errorf("version --json: %q (%v)", stdout.String(), err)
	}
}

// The built binary names the commit it was built from (the repository's VCS stamp).
func TestVersionOfBuiltBinary(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git: builds carry no VCS stamp")
	}
	if err := exec.Command("git", "rev-parse", "--git-dir").Run(); err != nil {
		t.Skip("not in a git work tree: builds carry no VCS stamp")
	}
	out, err := exec.Command(testbin.Path(t), "version").CombinedOutput()
	if err != nil {
		t.Fatalf("version: %v %s", err, out)
	}
	want := regexp.MustCompile(`^batchclaim ` + regexp.QuoteMeta(release) + `\+[0-9a-f]{12}(\.dirty)?\nmodule  github\.com/batchclaim/batchclaim/cmd/batchclaim \S+\ncommit  [0-9a-f]{40} \S+( \(modified work tree\))?\ngo      go\S+ \S+\n$`)
	if !want.Match(out) {
		t.Errorf("version printed %q, want it to match %s", out, want)
	}
}

func randomSecret(t *testing.T, prefix string) string {
	t.Helper()
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return prefix + hex.EncodeToString(b)
}

// An instance with a token file, TLS, a ledger credential and a database password in its URL
// is driven through good and bad requests, a token reload and `status`; no log line of any
// process, nor any command output, holds a secret.
func TestSecretsNeverLogged(t *testing.T) {
	t.Parallel()
	bin := testbin.Path(t)
	ctx := t.Context()
	password, token, token2, dltSecret, dltPassword := randomSecret(t, "pw"), randomSecret(t, "tok"), randomSecret(t, "tok"), randomSecret(t, "dlt"), randomSecret(t, "dltpw")

	// A login role with a password on the test server (trust auth: any password would do; the
	// point is that it is in the URL and must never be printed).
	plain, err := url.Parse(dbtest.NewDB(t))
	if err != nil {
		t.Fatal(err)
	}
	role := "bc_secret_" + strings.ToLower(randomSecret(t, "")[:8])
	admin, err := pgx.Connect(ctx, dbtest.AdminURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, fmt.Sprintf("CREATE ROLE %s LOGIN SUPERUSER PASSWORD '%s'", role, password)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), dbtest.AdminURL(t))
		if err == nil {
			_, _ = c.Exec(context.Background(), `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1`, role)
			_, _ = c.Exec(context.Background(), "DROP ROLE IF EXISTS "+role)
			c.Close(context.Background())
		}
	})
	secretURL := *plain
	secretURL.User = url.UserPassword(role, password)
	dbURL := secretURL.String()

	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "tokens")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cert := testcert.New(t)
	simAddr, addr := mustFreeAddr(t), mustFreeAddr(t)
	sim := startProc(t, bin, "dlt-sim", "--flavor", "sawtooth", "--listen", simAddr)
	waitHTTP(t, "http://"+simAddr+"/_sim/posts")
	// The ledger URL carries a password too (sent as basic auth; the simulator ignores it).
	run := startProc(t, bin, "run", "--database-url", dbURL, "--dlt-url", "http://ledger:"+dltPassword+"@"+simAddr,
		"--dlt-authorization", "Bearer "+dltSecret, "--listen", addr, "--auth-token-file", tokenFile,
		"--tls-cert", cert.CertFile, "--tls-key", cert.KeyFile, "--log-level", "debug",
		"--renew-interval", "100ms", "--expiry-1", "1s", "--expiry-2", "4s", "--poll-interval", "100ms")

	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: cert.Pool()}}}
	call := func(method, path, bearer, contentType string, body []byte) int {
		req, _ := http.NewRequest(method, "https://"+addr+path, bytes.NewReader(body))
		req.Header.Set("Content-Type", contentType)
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	deadline := time.Now().Add(30 * time.Second)
	for call("GET", "/readyz", "", "", nil) != http.StatusOK {
		if time.Now().After(deadline) {
			t.Fatal("instance not ready over https after 30s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	_, list := dlt.FakeBatch("svc-secret", 0)
	const octet = "application/octet-stream"
	for _, c := range []struct {
		name, bearer, contentType string
		body                      []byte
		want                      int
	}{
		{"no token", "", octet, list, 401},
		{"wrong token", token2, octet, list, 401},
		{"password as token", password, octet, list, 401},
		{"good token", token, octet, list, 202},
		{"good token, bad request", token, "text/plain", list, 400},
		{"good token, undecodable body", token, octet, []byte("not a batch list"), 400},
	} {
		if got := call("POST", "/batches?service_id=svc-secret", c.bearer, c.contentType, c.body); got != c.want {
			t.Errorf("POST /batches, %s: %d, want %d", c.name, got, c.want)
		}
	}

	// SIGHUP reloads the token file: the new token works, the removed one no longer does.
	if err := os.WriteFile(tokenFile, []byte(token2+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := run.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(30 * time.Second)
	for call("POST", "/batch_statuses", token2, "application/json", []byte(`["`+strings.Repeat("0", 128)+`"]`)) != http.StatusOK {
		if time.Now().After(deadline) {
			t.Fatal("the new token was not accepted within 30s of SIGHUP")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got := call("POST", "/batches?service_id=svc-secret", token, octet, list); got != 401 {
		t.Errorf("removed token after SIGHUP: %d, want 401", got)
	}

	// The operator's commands, good and bad, with the password in their URL.
	var outputs []string
	command := func(want int, args ...string) {
		var stdout, stderr bytes.Buffer
		code := realMain(ctx, args, &stdout, &stderr)
		if code != want {
			t.Errorf("%v: exit %d, want %d: %s", args[0], code, want, stderr.String())
		}
		outputs = append(outputs, stdout.String(), stderr.String())
	}
	command(0, "status", "--database-url", dbURL)
	command(0, "status", "--json", "--database-url", dbURL)
	unreachable := secretURL
	unreachable.Host = "127.0.0.1:1"
	command(1, "status", "--database-url", unreachable.String())
	command(1, "status", "--database-url", dbURL+"&sslmode=bogus")
	command(1, "status", "--database-url", dbURL+"%zz")
	command(1, "run", "--database-url", dbURL, "--dlt-url", "http://"+simAddr, "--auth-token-file", filepath.Join(dir, "missing"))

	// Stop both processes so that their whole output is in.
	for _, p := range []*proc{run, sim} {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		_ = p.cmd.Wait()
	}
	runLog := run.out.String()
	outputs = append(outputs, runLog, sim.out.String())
	for _, want := range []string{"listening", "tls=true", "auth=true", "token file reloaded", "postgres://" + role + ":xxxxx@", "http://ledger:xxxxx@"} {
		if !strings.Contains(runLog, want) {
			t.Errorf("the run log lacks %q: the test would not see secrets it never logged", want)
		}
	}
	lines := 0
	for _, out := range outputs {
		for line := range strings.Lines(out) {
			lines++
			for name, secret := range map[string]string{"token": token, "new token": token2, "database password": password, "ledger credential": dltSecret, "ledger password": dltPassword} {
				if strings.Contains(line, secret) {
					t.Errorf("the %s appears in: %s", name, line)
				}
			}
		}
	}
	t.Logf("searched %d lines", lines)
}
