package ingest_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/bits"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/batchclaim/batchclaim/dlt"
	"github.com/batchclaim/batchclaim/httpguard"
	"github.com/batchclaim/batchclaim/ingest"
	"github.com/batchclaim/batchclaim/pgdb"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
	"github.com/batchclaim/batchclaim/testkit/testutil"
)

// slowPost starts a POST /batches whose body has sent first and then waits; closing the
// returned writer ends the body.
func slowPost(t *testing.T, url string, first []byte) *io.PipeWriter {
	t.Helper()
	pr, pw := io.Pipe()
	t.Cleanup(func() { _ = pw.Close() })
	go func() {
		req, _ := http.NewRequest("POST", url, pr)
		req.Header.Set("Content-Type", "application/octet-stream")
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	if _, err := pw.Write(first); err != nil {
		t.Fatal(err)
	}
	return pw
}

type answer struct {
	code   int
	header http.Header
	body   map[string]any
}

func (a answer) errorCode() int {
	e, _ := a.body["error"].(map[string]any)
	c, _ := e["code"].(float64)
	return int(c)
}

func call(t *testing.T, method, url, contentType string, body []byte) answer {
	t.Helper()
	req, _ := http.NewRequest(method, url, bytes.NewReader(body))
	req.Header.Set("Content-Type", contentType)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	a := answer{code: resp.StatusCode, header: resp.Header}
	if err := json.Unmarshal(raw, &a.body); err != nil {
		t.Fatalf("%s %s: status %d, body not JSON: %q", method, url, resp.StatusCode, raw)
	}
	return a
}

// A client that sends its body slowly holds no request slot: with one slot, other requests
// are served while its body trickles in.
func TestSlowBodyHoldsNoSlot(t *testing.T) {
	t.Parallel()
	srv, pool := setupWith(t, ingest.Config{MaxRequests: 1})
	_, list := dlt.FakeBatch("svc-slow", 0)
	for i := range 3 {
		slowPost(t, srv.URL+"/batches?service_id=svc-slow", list[:10+i])
	}
	// Give the slow requests time to reach the handler (they must not need a slot there).
	testutil.WaitFor(t, 10*time.Second, "the slow requests reaching the handler", func() bool {
		a := call(t, "GET", srv.URL+"/batch_statuses?id="+strings.Repeat("a", 128), "", nil)
		return a.code == http.StatusOK
	})
	id, good := dlt.FakeBatch("svc-fast", 0)
	if a := call(t, "POST", srv.URL+"/batches?service_id=svc-fast", "application/octet-stream", good); a.code != http.StatusAccepted {
		t.Fatalf("POST while three bodies trickle in: %d %v", a.code, a.body)
	}
	if a := call(t, "GET", srv.URL+"/batch_statuses?id="+id, "", nil); a.code != http.StatusOK {
		t.Fatalf("GET /batch_statuses while three bodies trickle in: %d %v", a.code, a.body)
	}
	if n := count(t, pool, "batches"); n != 1 {
		t.Fatalf("%d batches stored, want the fast one only", n)
	}
}

// The bodies held at once stay within MaxMemory: once slow bodies hold it all, another
// request is answered 503 with Retry-After at once, and served again when they end.
func TestMemoryBudget(t *testing.T) {
	t.Parallel()
	srv, pool, h := setupHandler(t, ingest.Config{MaxBody: 64 << 10, MaxMemory: 128 << 10})
	_, list := dlt.FakeBatch("svc-a", 0)
	// A body's buffer doubles as its bytes arrive (at least 4 KiB, then twice what arrived
	// at most): bodies that sent 20, 20, 20, 10, 5, 1 and 1 KiB of an announced 60 KiB hold
	// 32, 32, 32, 16, 8, 4 and 4 KiB, the whole budget. Each is waited for: a buffer that
	// doubles holds the old one and the new one for a moment.
	var conns []net.Conn
	held := int64(0)
	for _, sent := range []int{20, 20, 20, 10, 5, 1, 1} {
		c, err := net.Dial("tcp", srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		fmt.Fprintf(c, "POST /batches?service_id=svc-slow HTTP/1.1\r\nHost: %s\r\nContent-Type: application/octet-stream\r\nContent-Length: %d\r\n\r\n",
			srv.Listener.Addr(), 60<<10)
		if _, err := c.Write(bytes.Repeat([]byte{1}, sent<<10)); err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		held += max(4<<10, int64(1)<<bits.Len(uint(sent<<10-1)))
		testutil.WaitFor(t, 20*time.Second, fmt.Sprintf("%d slow bodies holding %d bytes", len(conns), held), func() bool {
			mem, _ := h.Stats()
			return mem == held
		})
	}
	if held != 128<<10 {
		t.Fatalf("the slow bodies hold %d bytes, not the whole budget", held)
	}
	refused := call(t, "POST", srv.URL+"/batches?service_id=svc-a", "application/octet-stream", list)
	if refused.code != http.StatusServiceUnavailable {
		mem, _ := h.Stats()
		t.Fatalf("POST with the memory limit held: %d, want 503 (held %d bytes)", refused.code, mem)
	}
	if refused.errorCode() != ingest.CodeBusy || refused.header.Get("Retry-After") != "1" {
		t.Errorf("refused request: code %d, Retry-After %q; want %d and 1", refused.errorCode(), refused.header.Get("Retry-After"), ingest.CodeBusy)
	}
	if id, _ := refused.body["error"].(map[string]any)["request_id"].(string); id == "" || id != refused.header.Get(httpguard.HeaderRequestID) {
		t.Errorf("refused request: body request id %q, header %q", id, refused.header.Get(httpguard.HeaderRequestID))
	}
	_ = conns[0].Close() // the slow body ends, cut short: its memory comes back
	testutil.WaitFor(t, 10*time.Second, "the memory of the cut body coming back", func() bool {
		return call(t, "POST", srv.URL+"/batches?service_id=svc-a", "application/octet-stream", list).code == http.StatusAccepted
	})
	if n := count(t, pool, "batches"); n != 1 {
		t.Fatalf("%d batches stored, want 1", n)
	}
}

// A body of unknown length past MaxBody is refused once it passes the limit, nothing stored.
func TestOversizedChunkedBody(t *testing.T) {
	t.Parallel()
	srv, pool := setupWith(t, ingest.Config{MaxBody: 100 << 10})
	big := fakeList("svc", 600) // about 150 KiB
	req, _ := http.NewRequest("POST", srv.URL+"/batches?service_id=svc", io.MultiReader(bytes.NewReader(big)))
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if req.ContentLength != 0 || resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("chunked body of %d bytes: %d (request length %d), want 413", len(big), resp.StatusCode, req.ContentLength)
	}
	if n := count(t, pool, "batches"); n != 0 {
		t.Fatalf("%d batches stored", n)
	}
}

func fakeList(svc string, n int) []byte {
	var list []byte
	for i := range n {
		_, l := dlt.FakeBatch(svc, i)
		list = append(list, l...)
	}
	return list
}

// However many batches a list holds, every link of the 202 works: one link per chunk of at
// most MaxStatusIDs ids and MaxLinkLen bytes, in order, "link" the first of them.
func TestStatusLinksOfLargeLists(t *testing.T) {
	t.Parallel()
	srv, _ := setupWith(t, ingest.Config{MaxBody: 4 << 20, MaxMemory: 8 << 20})
	for _, n := range []int{1, 61, 133, 3640} {
		list := fakeList("svc-links", n)
		a := call(t, "POST", srv.URL+"/batches?service_id=svc-links", "application/octet-stream", list)
		if a.code != http.StatusAccepted {
			t.Fatalf("%d batches: %d %v", n, a.code, a.body)
		}
		var links []string
		if raw, ok := a.body["links"].([]any); ok {
			for _, l := range raw {
				links = append(links, l.(string))
			}
		} else {
			links = []string{a.body["link"].(string)}
		}
		if a.body["link"] != links[0] || (n <= 61) != (len(links) == 1) {
			t.Fatalf("%d batches: link %v, links %d", n, a.body["link"], len(links))
		}
		var got []string
		for _, l := range links {
			if len(l) > ingest.MaxLinkLen || !strings.HasPrefix(l, srv.URL+"/batch_statuses?id=") {
				t.Fatalf("%d batches: link of %d bytes: %.80s", n, len(l), l)
			}
			st := call(t, "GET", l, "", nil)
			data, _ := st.body["data"].([]any)
			if st.code != http.StatusOK || len(data) == 0 {
				t.Fatalf("%d batches: GET %.80s...: %d %v", n, l, st.code, st.body["error"])
			}
			for _, d := range data {
				got = append(got, d.(map[string]any)["id"].(string))
			}
		}
		want, err := dlt.BatchIDs(list)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Fatalf("%d batches: the links cover %d ids, not the list's %d in order", n, len(got), len(want))
		}
	}
}

// Without a guard that checked the Host header the links are relative: never built from a
// Host that nothing checked.
func TestStatusLinkWithoutGuardIsRelative(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewPool(t)
	h, err := ingest.NewHandler(dbtest.Open(t, pool, ""), ingest.Config{})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	h.Register(mux)
	_, list := dlt.FakeBatch("svc", 0)
	req := httptest.NewRequest("POST", "/batches?service_id=svc", bytes.NewReader(list))
	req.Host = "rebind.evil.example"
	req.Header.Set("Content-Type", "application/octet-stream")
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, req)
	if rec.Code != http.StatusAccepted || !strings.Contains(rec.Body.String(), `"link":"/batch_statuses?id=`) {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	h, err = ingest.NewHandler(dbtest.Open(t, pool, ""), ingest.Config{BaseURL: "https://ingest.example:8443/"})
	if err != nil {
		t.Fatal(err)
	}
	mux = http.NewServeMux()
	h.Register(mux)
	rec = httptest.NewRecorder()
	req = httptest.NewRequest("POST", "/batches?service_id=svc", bytes.NewReader(list))
	req.Header.Set("Content-Type", "application/octet-stream")
	mux.ServeHTTP(rec, req)
	if !strings.Contains(rec.Body.String(), `"link":"https://ingest.example:8443/batch_statuses?id=`) {
		t.Fatalf("with a base URL: %s", rec.Body)
	}
	for _, bad := range []string{"ingest.example", "ftp://x", "https://x/path", "https://x?q=1"} {
		if _, err := ingest.NewHandler(dbtest.Open(t, pool, ""), ingest.Config{BaseURL: bad}); err == nil {
			t.Errorf("base URL %q accepted", bad)
		}
	}
	if _, err := ingest.NewHandler(dbtest.Open(t, pool, ""), ingest.Config{MaxBody: 10 << 20, MaxMemory: 16 << 20}); err == nil {
		t.Error("a memory limit under twice the body limit was accepted")
	}
	if _, err := ingest.NewHandler(pgdb.DB{}, ingest.Config{}); err == nil {
		t.Error("the zero DB was accepted")
	}
}

// A 409 does not tell one client which service_id (maybe another tenant's) owns a batch id.
func TestConflictNamesNoOtherServiceID(t *testing.T) {
	t.Parallel()
	srv, pool := setup(t)
	id, list := dlt.FakeBatch("tenant-a-secret", 0)
	if a := call(t, "POST", srv.URL+"/batches?service_id=tenant-a-secret", "application/octet-stream", list); a.code != http.StatusAccepted {
		t.Fatal(a.code, a.body)
	}
	a := call(t, "POST", srv.URL+"/batches?service_id=tenant-b", "application/octet-stream", list)
	msg, _ := a.body["error"].(map[string]any)["message"].(string)
	if a.code != http.StatusConflict || a.errorCode() != 72 || !strings.Contains(msg, id) {
		t.Fatalf("%d %v", a.code, a.body)
	}
	if strings.Contains(msg, "tenant-a") || strings.Contains(msg, "seq") {
		t.Errorf("the 409 names the other service_id or its seq: %s", msg)
	}
	if n := count(t, pool, "batches"); n != 1 {
		t.Fatalf("%d batches", n)
	}
}

// The API holds at most MaxConns connections: with its one connection waiting on a
// service_id that another transaction holds, a request for another service_id waits for the
// connection, then gets 503 after MaxWait, instead of taking more of the pool.
func TestConnectionBound(t *testing.T) {
	t.Parallel()
	srv, pool := setupWith(t, ingest.Config{MaxConns: 1, MaxWait: 300 * time.Millisecond})
	ctx := t.Context()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	// The open transaction holds svc-held's enqueue lock.
	if _, err := ingest.Enqueue(ctx, tx, "svc-held", "held-0", []byte("x")); err != nil {
		t.Fatal(err)
	}
	_, held := dlt.FakeBatch("svc-held", 1)
	done := make(chan answer, 1)
	go func() {
		done <- call(t, "POST", srv.URL+"/batches?service_id=svc-held", "application/octet-stream", held)
	}()
	testutil.WaitFor(t, 10*time.Second, "the request waiting on the lock", func() bool { // the request waits on the lock, on its connection
		var waiting bool
		_ = pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database())`).Scan(&waiting)
		return waiting
	})
	_, other := dlt.FakeBatch("svc-other", 0)
	a := call(t, "POST", srv.URL+"/batches?service_id=svc-other", "application/octet-stream", other)
	if a.code != http.StatusServiceUnavailable || a.errorCode() != ingest.CodeBusy {
		t.Fatalf("second request with the one connection taken: %d %v", a.code, a.body)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if a := <-done; a.code != http.StatusAccepted {
		t.Fatalf("the waiting request: %d %v", a.code, a.body)
	}
	if a := call(t, "POST", srv.URL+"/batches?service_id=svc-other", "application/octet-stream", other); a.code != http.StatusAccepted {
		t.Fatalf("after the lock was released: %d %v", a.code, a.body)
	}
}
