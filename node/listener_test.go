package node_test

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"math/bits"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/batchclaim/batchclaim/dlt"
	"github.com/batchclaim/batchclaim/dlt/dltsim"
	"github.com/batchclaim/batchclaim/httpauth"
	"github.com/batchclaim/batchclaim/node"
	"github.com/batchclaim/batchclaim/testkit/testcert"
	"github.com/batchclaim/batchclaim/testkit/testutil"
)

// sawtoothError is the error body of the ingest API.
type sawtoothError struct {
	Error struct {
		Code    int    `json:"code"`
		Title   string `json:"title"`
		Message string `json:"message"`
	} `json:"error"`
}

// httpsClient trusts only cert.
func httpsClient(cert testcert.Cert) *http.Client {
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: cert.Pool()}}}
}

func do(t *testing.T, c *http.Client, method, url, token string, body io.Reader) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

// A token-protected instance over TLS refuses an unauthenticated POST with 401 in the Sawtooth
// shape, accepts an authenticated one, keeps health open, and follows a token file reload.
func TestListenerTLSAndAuth(t *testing.T) {
	t.Parallel()
	e := setup(t, dlt.FlavorSawtooth, dltsim.Config{CommitLatency: 5 * time.Millisecond})
	cert := testcert.New(t)
	tokenFile := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokenFile, []byte("first-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tokens, err := httpauth.LoadTokens(tokenFile)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := e.start("tls", func(c *node.Config) {
		c.Listen, c.TLSCertFile, c.TLSKeyFile, c.Auth = "127.0.0.1:0", cert.CertFile, cert.KeyFile, tokens.Middleware
	})
	testutil.WaitFor(t, 10*time.Second, "listener up", func() bool { return n.Addr() != "" })
	base := "https://" + n.Addr()
	client := httpsClient(cert)
	_, list := dlt.FakeBatch("svc-tls", 0)
	post := func(token string) (*http.Response, []byte) {
		return do(t, client, "POST", base+"/batches?service_id=svc-tls", token, bytes.NewReader(list))
	}

	resp, body := post("")
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("unauthenticated POST: %d %s", resp.StatusCode, body)
	}
	var e401 sawtoothError
	if err := json.Unmarshal(body, &e401); err != nil || e401.Error.Code != httpauth.CodeUnauthorized || e401.Error.Title == "" || e401.Error.Message == "" {
		t.Fatalf("401 body %s is not in the Sawtooth error shape (%v)", body, err)
	}
	var stored int
	if err := e.admin.QueryRow(t.Context(), `SELECT count(*) FROM batchclaim.batches`).Scan(&stored); err != nil || stored != 0 {
		t.Fatalf("after the refused POST: %d batches stored (%v), want 0", stored, err)
	}
	if resp, body := post("first-token"); resp.StatusCode != http.StatusAccepted || !strings.Contains(string(body), `"link":"https://`) {
		t.Fatalf("authenticated POST: %d %s", resp.StatusCode, body)
	}
	if resp, _ := do(t, client, "GET", base+"/healthz", "", nil); resp.StatusCode != http.StatusOK {
		t.Errorf("/healthz without a token: %d", resp.StatusCode)
	}
	if resp, _ := do(t, client, "GET", base+"/metrics", "", nil); resp.StatusCode != http.StatusOK {
		t.Errorf("/metrics without a token: %d", resp.StatusCode)
	}
	if resp, err := http.Get("http://" + n.Addr() + "/healthz"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Error("plain HTTP answered 200 on the TLS listener")
		}
	}

	if err := os.WriteFile(tokenFile, []byte("second-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := tokens.Reload(); err != nil {
		t.Fatal(err)
	}
	if resp, _ := post("first-token"); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("removed token after reload: %d, want 401", resp.StatusCode)
	}
	if resp, body := post("second-token"); resp.StatusCode != http.StatusAccepted {
		t.Errorf("new token after reload: %d %s", resp.StatusCode, body)
	}
}

// A body that never ends holds no ingest slot (other requests are served meanwhile) and is
// cut by the read timeout; bodies held past MaxIngestMemory make the ingest API answer 503
// with Retry-After; oversized headers get 431.
func TestListenerLimits(t *testing.T) {
	t.Parallel()
	e := setup(t, dlt.FlavorSawtooth, dltsim.Config{})
	n, _ := e.start("limits", func(c *node.Config) {
		c.Listen, c.MaxIngestRequests, c.ReadTimeout, c.MaxHeaderBytes = "127.0.0.1:0", 1, 15*time.Second, 4<<10
		c.MaxBody, c.MaxIngestMemory = 64<<10, 128<<10
	})
	testutil.WaitFor(t, 10*time.Second, "listener up", func() bool { return n.Addr() != "" })
	base := "http://" + n.Addr()
	client := &http.Client{Timeout: 30 * time.Second}

	// POSTs whose bodies never end, each holding the buffer of what it sent (at least 4 KiB,
	// at most twice what arrived: 20, 20, 20, 10, 5, 1 and 1 KiB of an announced 60 KiB hold
	// 32, 32, 32, 16, 8, 4 and 4 KiB), together the whole memory limit, but no slot. Each is
	// waited for, as the instance's own gauge reports it: a buffer that doubles holds the old
	// one and the new one for a moment.
	gauge := func() string {
		_, m := do(t, client, "GET", base+"/metrics", "", nil)
		for _, l := range strings.Split(string(m), "\n") {
			if strings.HasPrefix(l, "batchclaim_ingest_memory_bytes ") {
				return strings.TrimPrefix(l, "batchclaim_ingest_memory_bytes ")
			}
		}
		return "absent"
	}
	var heldConns []net.Conn
	total := 0
	for _, sent := range []int{20, 20, 20, 10, 5, 1, 1} {
		c, err := net.Dial("tcp", n.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprintf(c, "POST /batches?service_id=svc-slow HTTP/1.1\r\nHost: %s\r\nContent-Type: application/octet-stream\r\nContent-Length: %d\r\n\r\n", n.Addr(), 60<<10)
		if _, err := c.Write(bytes.Repeat([]byte{0x0a}, sent<<10)); err != nil {
			t.Fatal(err)
		}
		heldConns = append(heldConns, c)
		total += max(4<<10, 1<<bits.Len(uint(sent<<10-1)))
		testutil.WaitFor(t, 14*time.Second, fmt.Sprintf("%d slow bodies holding %d bytes", len(heldConns), total), func() bool {
			return gauge() == fmt.Sprint(total)
		})
	}
	if total != 128<<10 {
		t.Fatalf("the slow bodies hold %d bytes, not the whole memory limit", total)
	}
	_, list := dlt.FakeBatch("svc-fast", 0)
	busy, busyBody := do(t, client, "POST", base+"/batches?service_id=svc-fast", "", bytes.NewReader(list))
	if busy.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("POST while slow bodies hold the whole memory limit: %d %s, want 503 (memory gauge %s)", busy.StatusCode, busyBody, gauge())
	}
	if ra := busy.Header.Get("Retry-After"); ra != "1" {
		t.Errorf("503 Retry-After %q, want 1", ra)
	}
	var e503 sawtoothError
	if err := json.Unmarshal(busyBody, &e503); err != nil || e503.Error.Code != node.CodeBusy {
		t.Errorf("503 body %s not in the Sawtooth error shape (%v)", busyBody, err)
	}
	// No slot is held: a status request (no body) goes through to the handler.
	if resp, body := do(t, client, "GET", base+"/batch_statuses?id=x", "", nil); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("GET /batch_statuses while slow bodies are held: %d %s, want 400 (a bad id)", resp.StatusCode, body)
	}
	if resp, _ := do(t, client, "GET", base+"/healthz", "", nil); resp.StatusCode != http.StatusOK {
		t.Errorf("/healthz while ingest is saturated: %d", resp.StatusCode)
	}

	// The read timeout (15s) ends the held requests although their bodies never end.
	for _, c := range heldConns {
		_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
		if _, err := io.Copy(io.Discard, c); err != nil {
			t.Fatalf("a request whose body never ends was not cut by the read timeout: %v", err)
		}
	}
	testutil.WaitFor(t, 10*time.Second, "the memory given back", func() bool {
		resp, _ := do(t, client, "POST", base+"/batches?service_id=svc-fast", "", bytes.NewReader(list))
		return resp.StatusCode == http.StatusAccepted
	})

	req, _ := http.NewRequest("GET", base+"/healthz", nil)
	req.Header.Set("X-Large", strings.Repeat("x", 16<<10))
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("16 KiB header with MaxHeaderBytes 4 KiB: %d, want 431", resp.StatusCode)
	}
}

// Beyond MaxConnections a connection is closed as soon as it is accepted; once one closes,
// the next is served.
func TestListenerConnectionLimit(t *testing.T) {
	t.Parallel()
	e := setup(t, dlt.FlavorSawtooth, dltsim.Config{})
	n, _ := e.start("conns", func(c *node.Config) { c.Listen, c.MaxConnections = "127.0.0.1:0", 3 })
	testutil.WaitFor(t, 10*time.Second, "listener up", func() bool { return n.Addr() != "" })
	var held []net.Conn
	for range 3 {
		c, err := net.Dial("tcp", n.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		held = append(held, c)
	}
	get := func(path string) int {
		client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
		resp, err := client.Get("http://" + n.Addr() + path)
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	// The three held connections may not all be accepted yet: wait until one more is one of
	// the probes' reserve, which answers the ingest API 503 and the probes as ever.
	testutil.WaitFor(t, 10*time.Second, "a fourth connection kept to the probes", func() bool { return get("/batch_statuses?id=x") == http.StatusServiceUnavailable })
	for _, path := range []string{"/healthz", "/metrics"} {
		if code := get(path); code != http.StatusOK {
			t.Errorf("GET %s with MaxConnections held: %d, want 200", path, code)
		}
	}
	if code := get("/readyz"); code == 0 {
		t.Error("GET /readyz with MaxConnections held: no answer")
	}
	_ = held[0].Close()
	testutil.WaitFor(t, 10*time.Second, "a connection served once one closed", func() bool { return get("/batch_statuses?id=x") == http.StatusBadRequest })
}
