package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/batchclaim/batchclaim/testkit/dbtest"
)

// ui refuses a listener other hosts can reach unless a token file (or --insecure-listen)
// says who may resume, before it touches the database.
func TestUIRefusesOpenListenWithoutTokens(t *testing.T) {
	t.Parallel()
	var stdout, stderr bytes.Buffer
	code := realMain(t.Context(), []string{"ui", "--listen", "0.0.0.0:0", "--database-url", "postgres://nowhere.invalid/x"}, &stdout, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), "not a loopback address") {
		t.Fatalf("exit %d, stderr %q; want 1 and a refusal", code, stderr.String())
	}
}

// ui has no TLS of its own: with a token file on an address other hosts can reach it warns
// that the tokens travel in clear text, naming what to do; on loopback it does not. The
// warning comes before the database is opened, which fails here.
func TestUIWarnsOfClearTextTokens(t *testing.T) {
	t.Parallel()
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte("t0ken\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const warning = "bearer tokens travel in clear text: ui serves plain HTTP; terminate TLS in front of it, or listen on loopback"
	for listen, warns := range map[string]bool{"0.0.0.0:0": true, ":0": true, "127.0.0.1:0": false, "[::1]:0": false, "localhost:0": false} {
		var stdout, stderr bytes.Buffer
		code := realMain(t.Context(), []string{"ui", "--listen", listen, "--auth-token-file", tokens,
			"--database-url", "postgres://nobody@127.0.0.1:1/none?connect_timeout=1"}, &stdout, &stderr)
		if code != 1 || !strings.Contains(stderr.String(), "127.0.0.1:1") {
			t.Errorf("--listen %s: exit %d, stderr %q; want 1 and the database error", listen, code, stderr.String())
		}
		if got := strings.Contains(stderr.String(), warning); got != warns {
			t.Errorf("--listen %s with a token file: warned %t, want %t; stderr %q", listen, got, warns, stderr.String())
		}
		if strings.Contains(stderr.String(), "--tls-cert") {
			t.Errorf("--listen %s: the log names --tls-cert, which ui lacks: %q", listen, stderr.String())
		}
	}
}

// ui serves the page and its data from the database alone; with a token file, the data and
// resume need a bearer token while the page itself stays readable.
func TestUIServesStatusPage(t *testing.T) {
	t.Parallel()
	url := dbtest.NewDB(t)
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte("t0ken\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	out, w := io.Pipe()
	var stderr bytes.Buffer
	done := make(chan int, 1)
	go func() {
		done <- realMain(ctx, []string{"ui", "--listen", "127.0.0.1:0", "--database-url", url, "--auth-token-file", tokens}, w, &stderr)
		w.Close()
	}()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		cancel()
		t.Fatalf("no address printed: %v; stderr %s", err, stderr.String())
	}
	go func() { _, _ = io.Copy(io.Discard, out) }()
	base := strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(line), "status page on "), "/")
	if !strings.HasPrefix(base, "http://127.0.0.1:") {
		cancel()
		t.Fatalf("printed %q", line)
	}

	get := func(path string, token ...string) (int, string) {
		req, _ := http.NewRequest("GET", base+path, nil)
		if len(token) > 0 {
			req.Header.Set("Authorization", "Bearer "+token[0])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/"); code != 200 || !strings.Contains(body, "batchclaim status") {
		t.Errorf("GET /: %d", code)
	}
	if code, _ := get("/api/status"); code != http.StatusUnauthorized {
		t.Errorf("GET /api/status without a token: %d, want 401", code)
	}
	code, body := get("/api/status", "t0ken")
	var st struct {
		Instances []any `json:"instances"`
	}
	if code != 200 || json.Unmarshal([]byte(body), &st) != nil || st.Instances == nil {
		t.Errorf("GET /api/status: %d %s", code, body)
	}
	resp, err := http.Post(base+"/api/halts/svc-x/resume", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("resume without a token: %d, want 401", resp.StatusCode)
	}
	req, _ := http.NewRequest("POST", base+"/api/halts/svc-x/resume", nil)
	req.Header.Set("Authorization", "Bearer t0ken")
	if resp, err = http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("resume of a service_id that is not halted, with the token: %d, want 404", resp.StatusCode)
	}

	cancel()
	if code := <-done; code != 0 {
		t.Errorf("exit %d after cancel; stderr %s", code, stderr.String())
	}
}

// ui --help names every write of the page (resume, retry, cancel) and says what the token
// gates: the page's data (the read scope) and every write (the operate scope).
func TestUIHelpNamesEveryWrite(t *testing.T) {
	t.Parallel()
	var stdout, stderr bytes.Buffer
	if code := realMain(t.Context(), []string{"ui", "--help"}, &stdout, &stderr); code != 0 {
		t.Fatalf("ui --help: exit %d", code)
	}
	help := strings.Join(strings.Fields(stdout.String()+stderr.String()), " ")
	for _, want := range []string{"resumes a halted service_id", "retries and cancels batches", "every request for its data (the /api/ reads) needs a bearer token of the read scope", "every write one of the operate scope"} {
		if !strings.Contains(help, want) {
			t.Errorf("ui --help lacks %q:\n%s", want, stderr.String())
		}
	}
	if strings.Contains(help, "one write") {
		t.Errorf("ui --help still speaks of one write:\n%s", stderr.String())
	}
}
