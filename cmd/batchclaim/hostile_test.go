package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batchclaim/batchclaim/cmd/batchclaim/internal/testbin"
	"github.com/batchclaim/batchclaim/dlt"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
	"github.com/batchclaim/batchclaim/testkit/testcert"
	"github.com/batchclaim/batchclaim/testkit/testutil"
)

// The hostile suite: one real `batchclaim run` process, built here, driven as a careless
// client or an attacker would (docs/operations.md, "Hostile load"), then the database is
// checked for anything partially stored and the process for still serving within its memory
// bound. `make hostile` runs it alone.

// hostileRSSLimit is the most the instance's resident memory may ever reach (its peak,
// VmHWM) under the suite's load, 32 concurrent 10 MiB bad bodies included.
const hostileRSSLimit = 512 << 20

// hostileProc is a process started by the suite, with its output readable while it runs.
type hostileProc struct {
	cmd *exec.Cmd
	out *syncWriter
}

func (p *hostileProc) output() string {
	p.out.mu.Lock()
	defer p.out.mu.Unlock()
	return p.out.w.String()
}

// logLines are the process's JSON log lines (others skipped).
func (p *hostileProc) logLines() []map[string]any {
	var lines []map[string]any
	for line := range strings.Lines(p.output()) {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil {
			lines = append(lines, m)
		}
	}
	return lines
}

// memKiB reads a field of /proc/PID/status (VmRSS, VmHWM) in KiB.
func (p *hostileProc) memKiB(t *testing.T, field string) int64 {
	t.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		t.Fatalf("read the process's memory: %v", err)
	}
	for line := range strings.Lines(string(raw)) {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kib, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kib
		}
	}
	t.Fatalf("no %s in /proc/PID/status", field)
	return 0
}

func startHostile(t *testing.T, bin string, args ...string) *hostileProc {
	t.Helper()
	p := &hostileProc{cmd: exec.Command(bin, args...), out: &syncWriter{w: &bytes.Buffer{}}}
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = p.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = p.cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("output of %v:\n%s", args[:1], p.output())
		}
	})
	return p
}

// answer is one HTTP answer as the suite sees it.
type answer struct {
	status int
	header http.Header
	body   []byte
	err    error // the request got no answer (status 0)
}

// apiError decodes the error body: its code and request id.
func (a answer) apiError() (code int, requestID, message string) {
	var e struct {
		Error struct {
			Code      int    `json:"code"`
			Message   string `json:"message"`
			RequestID string `json:"request_id"`
		} `json:"error"`
	}
	_ = json.Unmarshal(a.body, &e)
	return e.Error.Code, e.Error.RequestID, e.Error.Message
}

// request is one request of a probe.
type request struct {
	method, path, host, contentType, token string
	headers                                map[string]string
	body                                   []byte
}

type hostileClient struct {
	t    *testing.T
	base string // scheme://addr
	http *http.Client
}

func (c *hostileClient) do(r request) answer {
	c.t.Helper()
	req, err := http.NewRequest(r.method, c.base+r.path, bytes.NewReader(r.body))
	if err != nil {
		c.t.Fatal(err)
	}
	if r.body == nil {
		req.Body, req.ContentLength = nil, 0
	}
	if r.host != "" {
		req.Host = r.host
	}
	if r.contentType != "" {
		req.Header.Set("Content-Type", r.contentType)
	}
	if r.token != "" {
		req.Header.Set("Authorization", "Bearer "+r.token)
	}
	for k, v := range r.headers {
		req.Header.Set(k, v)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return answer{err: err}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{status: resp.StatusCode, header: resp.Header, body: b}
}

func (c *hostileClient) waitStatus(path string, want int, within time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(within)
	for {
		a := c.do(request{method: "GET", path: path})
		if a.status == want {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("GET %s: %d %s, not %d within %s", path, a.status, a.body, want, within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

const octet = "application/octet-stream"

// metric is the value of a series in /metrics, or -1 when the series is missing.
func (c *hostileClient) metric(series string) float64 {
	c.t.Helper()
	a := c.do(request{method: "GET", path: "/metrics"})
	for line := range strings.Lines(string(a.body)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				c.t.Fatalf("%s: %v", line, err)
			}
			return f
		}
	}
	return -1
}

// bigList is a BatchList of at most size bytes of fake batches of svc; bad ends it with a
// batch that does not decode, so that the whole list is refused after it was read and
// parsed.
func bigList(svc string, size int, bad bool) []byte {
	tail := []byte{0x0a, 0x02, 0xff, 0xff} // field 1, two bytes that are no Batch
	if !bad {
		tail = nil
	}
	var list []byte
	for i := 0; ; i++ {
		_, l := dlt.FakeBatch(svc, i)
		if len(list)+len(l)+len(tail) > size {
			return append(list, tail...)
		}
		list = append(list, l...)
	}
}

// TestHostile runs the probes against one instance on the default loopback listener without
// tokens (as most first deployments run), its database link through a proxy that can cut it.
func TestHostile(t *testing.T) {
	t.Parallel()
	bin := testbin.Path(t)
	ctx := t.Context()
	dbURL := dbtest.NewDB(t)
	admin, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(admin.Close)
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	proxy, viaProxy := dbtest.Proxied(t, dbURL)

	simAddr, addr := mustFreeAddr(t), mustFreeAddr(t)
	startHostile(t, bin, "dlt-sim", "--flavor", "sawtooth", "--listen", simAddr, "--commit-latency", "20ms")
	waitHTTP(t, "http://"+simAddr+"/_sim/posts")
	run := startHostile(t, bin, "run", "--database-url", viaProxy, "--dlt-url", "http://"+simAddr,
		"--listen", addr, "--db-max-conns", "4", "--log-format", "json", "--poll-interval", "100ms") // the default timings: lock_timeout = R = 5s
	c := &hostileClient{t: t, base: "http://" + addr, http: &http.Client{Timeout: 2 * time.Minute}}
	c.waitStatus("/readyz", http.StatusOK, 30*time.Second)
	baseline := run.memKiB(t, "VmHWM")

	t.Run("item 1: 32 concurrent 10 MiB bad bodies", func(t *testing.T) {
		body := bigList("svc-mem", 10<<20, true)
		answers := make([]answer, 32)
		var wg sync.WaitGroup
		for i := range answers {
			wg.Go(func() {
				answers[i] = c.do(request{method: "POST", path: "/batches?service_id=svc-mem", contentType: octet, body: body})
			})
		}
		wg.Wait()
		counts := map[int]int{}
		resets := 0
		for _, a := range answers {
			counts[a.status]++
			code, id, _ := a.apiError()
			switch {
			case a.status == http.StatusBadRequest && code == 35:
			case a.status == http.StatusServiceUnavailable && code == 31 && a.header.Get("Retry-After") == "1":
			case a.status == 0 && (errors.Is(a.err, syscall.ECONNRESET) || errors.Is(a.err, syscall.EPIPE)):
				// Refused before its body was read (503, code 31): the server closes the
				// connection with most of the 10 MiB unread, and the kernel resets it, which
				// may reach the client before the answer does. Reading the body to the end
				// instead is what the bound is there to avoid.
				resets++
				continue
			default:
				t.Errorf("answer %d code %d: %.200s (%v)", a.status, code, a.body, a.err)
			}
			if id == "" || id != a.header.Get("X-Request-Id") {
				t.Errorf("error answer without its request id: header %q, body %q", a.header.Get("X-Request-Id"), id)
			}
		}
		peak := run.memKiB(t, "VmHWM")
		t.Logf("answers %v (%d of them connections reset before the answer arrived); peak RSS %d MiB (before the burst %d MiB, limit %d MiB)", counts, resets, peak>>10, baseline>>10, hostileRSSLimit>>20)
		if resets > len(answers)/4 {
			t.Errorf("%d of %d requests reset without an answer: the refusals should mostly reach the client", resets, len(answers))
		}
		if counts[http.StatusBadRequest] == 0 {
			t.Error("no body was read and refused: the probe did not load the instance")
		}
		if peak<<10 > hostileRSSLimit {
			t.Errorf("peak RSS %d MiB, over %d MiB", peak>>10, hostileRSSLimit>>20)
		}
	})

	t.Run("item 2: slow bodies hold no ingest slot", func(t *testing.T) {
		// 80 connections send a POST's headers, announcing 10 MiB, and one byte of the body,
		// then wait: more than --max-ingest-requests (64).
		const slow = 80
		for range slow {
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = conn.Close() })
			fmt.Fprintf(conn, "POST /batches?service_id=svc-slow HTTP/1.1\r\nHost: %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n\x0a", addr, octet, 10<<20)
		}
		// Each holds the first 4 KiB buffer of its body, for the byte it sent (memory is
		// reserved as bytes arrive, not from the 10 MiB announced); wait until all of them do.
		deadline := time.Now().Add(30 * time.Second)
		for c.metric("batchclaim_ingest_memory_bytes") < slow*4<<10 {
			if time.Now().After(deadline) {
				t.Fatalf("the slow bodies hold %v bytes after 30s, want %d", c.metric("batchclaim_ingest_memory_bytes"), slow*4<<10)
			}
			time.Sleep(20 * time.Millisecond)
		}
		if held := c.metric("batchclaim_ingest_memory_bytes"); held != slow*4<<10 {
			t.Errorf("%d bodies that sent one byte each hold %v bytes, want 4 KiB each", slow, held)
		}
		if n := c.metric("batchclaim_ingest_requests_in_progress"); n != 0 {
			t.Errorf("%v ingest requests in progress while only slow bodies arrive, want 0", n)
		}
		for i := range 5 {
			id, list := dlt.FakeBatch("svc-good", i)
			if a := c.do(request{method: "POST", path: "/batches?service_id=svc-good", contentType: octet, body: list}); a.status != http.StatusAccepted {
				t.Fatalf("POST while %d bodies trickle in: %d %s", slow, a.status, a.body)
			}
			if a := c.do(request{method: "GET", path: "/batch_statuses?id=" + id}); a.status != http.StatusOK {
				t.Fatalf("GET /batch_statuses while %d bodies trickle in: %d %s", slow, a.status, a.body)
			}
		}
	})

	t.Run("item 3: readiness and metrics while ingest fills a 4-connection pool", func(t *testing.T) {
		list := bigList("svc-pool", 1<<20, false)
		answers := make([]answer, 12)
		var wg sync.WaitGroup
		for i := range answers {
			wg.Go(func() {
				answers[i] = c.do(request{method: "POST", path: "/batches?service_id=svc-pool", contentType: octet, body: list})
			})
		}
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		probes, notReady := 0, 0
		for waiting := true; waiting; {
			select {
			case <-done:
				waiting = false
			default:
			}
			probes++
			if a := c.do(request{method: "GET", path: "/readyz"}); a.status != http.StatusOK {
				notReady++
				t.Errorf("/readyz while ingest works: %d %s", a.status, a.body)
			}
			if v := c.metric("batchclaim_database_readable"); v != 1 {
				t.Errorf("/metrics while ingest works: batchclaim_database_readable %v", v)
			}
		}
		stored := 0
		for _, a := range answers {
			code, _, _ := a.apiError()
			switch {
			case a.status == http.StatusAccepted:
				stored++
			case a.status == http.StatusServiceUnavailable && code == 31:
			default:
				t.Errorf("re-post: %d %.200s", a.status, a.body)
			}
		}
		t.Logf("%d of 12 re-posts stored, %d readiness probes, %d not ready", stored, probes, notReady)
		if stored == 0 {
			t.Error("no re-post was stored")
		}
	})

	// Bad requests: each is refused with the status and code given, carries its request id,
	// and stores nothing (checked on the database at the end).
	evil := "rebind.evil.example:" + strings.Split(addr, ":")[1]
	_, good := dlt.FakeBatch("svc-probe", 0)
	for _, p := range []struct {
		name       string
		req        request
		status     int
		code       int // of the Sawtooth error body; 0: not checked
		wantInBody string
	}{
		{"item 6: DNS rebinding, POST /batches", request{method: "POST", path: "/batches?service_id=svc-rebind", host: evil, contentType: octet, body: good,
			headers: map[string]string{"Origin": "http://" + evil}}, 421, 81, ""},
		{"item 6: DNS rebinding, resume", request{method: "POST", path: "/api/halts/svc-rebind/resume", host: evil,
			headers: map[string]string{"Origin": "http://" + evil}}, 421, 81, ""},
		{"item 6: DNS rebinding, status read", request{method: "GET", path: "/api/status", host: evil}, 421, 81, ""},
		{"item 6: DNS rebinding, batch statuses", request{method: "GET", path: "/batch_statuses?id=" + strings.Repeat("a", 128), host: evil}, 421, 81, ""},
		{"item 6: cross-origin POST", request{method: "POST", path: "/batches?service_id=svc-rebind", contentType: octet, body: good,
			headers: map[string]string{"Origin": "http://evil.example"}}, 403, 82, ""},
		{"item 7: service_id not UTF-8", request{method: "POST", path: "/batches?service_id=%FF%FE", contentType: octet, body: good}, 400, 70, "not valid UTF-8"},
		{"item 7: service_id with NUL", request{method: "POST", path: "/batches?service_id=svc%00", contentType: octet, body: good}, 400, 70, "U+0000"},
		{"item 7: halts API, not UTF-8", request{method: "POST", path: "/api/halts/%FF%FE/resume"}, 400, 0, "not valid UTF-8"},
		{"item 7: halts API, NUL", request{method: "POST", path: "/api/halts/svc%00/resume"}, 400, 0, "U+0000"},
		{"item 8: C1 control (CSI)", request{method: "POST", path: "/batches?service_id=svc%C2%9B31m", contentType: octet, body: good}, 400, 70, "U+009B"},
		{"item 8: right-to-left override", request{method: "POST", path: "/batches?service_id=svc%E2%80%AEgpj", contentType: octet, body: good}, 400, 70, "U+202E"},
		{"item 8: zero-width space", request{method: "POST", path: "/batches?service_id=svc%E2%80%8B", contentType: octet, body: good}, 400, 70, "U+200B"},
		{"item 8: halts API, bidi override", request{method: "POST", path: "/api/halts/svc%E2%80%AE/resume"}, 400, 0, "U+202E"},
		{"look-alike: Hangul filler", request{method: "POST", path: "/batches?service_id=svc%E3%85%A4", contentType: octet, body: good}, 400, 70, "U+3164"},
		{"look-alike: Braille pattern blank", request{method: "POST", path: "/batches?service_id=svc%E2%A0%80", contentType: octet, body: good}, 400, 70, "U+2800"},
		{"look-alike: not NFC", request{method: "POST", path: "/batches?service_id=a%CC%81", contentType: octet, body: good}, 400, 70, "not in Unicode Normalization Form C (NFC)"},
		{"look-alike: halts API, variation selector", request{method: "POST", path: "/api/halts/svc%EF%B8%8F/resume"}, 400, 0, "U+FE0F"},
		{"oversized body, announced", request{method: "POST", path: "/batches?service_id=svc-big", contentType: octet, body: make([]byte, 10<<20+1)}, 413, 36, ""},
		{"undecodable body", request{method: "POST", path: "/batches?service_id=svc-garbage", contentType: octet, body: []byte("\xff\xff\xffnot protobuf")}, 400, 35, ""},
	} {
		t.Run(p.name, func(t *testing.T) {
			a := c.do(p.req)
			code, id, _ := a.apiError()
			if a.status != p.status || (p.code != 0 && code != p.code) {
				t.Fatalf("%d code %d, want %d code %d: %s", a.status, code, p.status, p.code, a.body)
			}
			if !strings.Contains(string(a.body), p.wantInBody) {
				t.Errorf("answer %s lacks %q", a.body, p.wantInBody)
			}
			if rid := a.header.Get("X-Request-Id"); rid == "" || (id != "" && id != rid) || !strings.Contains(string(a.body), `"request_id":"`+rid+`"`) {
				t.Errorf("request id: header %q, body %s", rid, a.body)
			}
		})
	}

	t.Run("item 9: every status link of a large list works, built from a checked host", func(t *testing.T) {
		host := "localhost:" + strings.Split(addr, ":")[1]
		for _, n := range []int{133, 3640} {
			var list []byte
			for i := range n {
				_, l := dlt.FakeBatch("svc-links", i)
				list = append(list, l...)
			}
			a := c.do(request{method: "POST", path: "/batches?service_id=svc-links", host: host, contentType: octet, body: list})
			var out struct {
				Link  string   `json:"link"`
				Links []string `json:"links"`
			}
			if err := json.Unmarshal(a.body, &out); a.status != http.StatusAccepted || err != nil || len(out.Links) < 2 || out.Link != out.Links[0] {
				t.Fatalf("%d batches: %d %.300s", n, a.status, a.body)
			}
			ids := 0
			for _, l := range out.Links {
				if !strings.HasPrefix(l, "http://"+host+"/batch_statuses?id=") || len(l) > 8000 {
					t.Fatalf("%d batches: link of %d bytes %.80s", n, len(l), l)
				}
				st := c.do(request{method: "GET", path: strings.TrimPrefix(l, "http://"+host)})
				var data struct {
					Data []any `json:"data"`
				}
				if st.status != http.StatusOK || json.Unmarshal(st.body, &data) != nil {
					t.Fatalf("%d batches: GET of a link: %d %.200s", n, st.status, st.body)
				}
				ids += len(data.Data)
			}
			if ids != n {
				t.Errorf("%d batches: the links cover %d", n, ids)
			}
		}
	})

	t.Run("item 10: a 409 does not name another service_id", func(t *testing.T) {
		id, list := dlt.FakeBatch("tenant-a-secret", 0)
		if a := c.do(request{method: "POST", path: "/batches?service_id=tenant-a-secret", contentType: octet, body: list}); a.status != http.StatusAccepted {
			t.Fatalf("%d %s", a.status, a.body)
		}
		a := c.do(request{method: "POST", path: "/batches?service_id=tenant-b", contentType: octet, body: list})
		code, _, msg := a.apiError()
		if a.status != http.StatusConflict || code != 72 || !strings.Contains(msg, id) || strings.Contains(msg, "tenant-a") {
			t.Errorf("%d code %d: %s", a.status, code, msg)
		}
	})

	t.Run("item 5: metrics, errors and logs while the database is away", func(t *testing.T) {
		proxy.Cut()
		defer proxy.Restore()
		c.waitStatus("/readyz", http.StatusServiceUnavailable, 30*time.Second)
		a := c.do(request{method: "GET", path: "/metrics"})
		if a.status != http.StatusOK {
			t.Fatalf("/metrics during the outage: %d %s", a.status, a.body)
		}
		for _, want := range []string{"batchclaim_claim_cycle_errors_total ", "batchclaim_deadline_fences_total ", "batchclaim_database_readable 0"} {
			if !bytes.Contains(a.body, []byte(want)) {
				t.Errorf("/metrics during the outage lacks %q", want)
			}
		}
		for _, secret := range []string{u.User.Username() + "@", strings.TrimPrefix(u.Path, "/"), proxy.Addr()} {
			for _, path := range []string{"/metrics", "/readyz", "/api/status"} {
				if b := c.do(request{method: "GET", path: path}).body; bytes.Contains(b, []byte(secret)) {
					t.Errorf("GET %s during the outage names %q: %.300s", path, secret, b)
				}
			}
		}
		for range 10 {
			if a := c.do(request{method: "GET", path: "/api/status"}); a.status != http.StatusServiceUnavailable {
				t.Errorf("/api/status during the outage: %d", a.status)
			}
		}
		_, list := dlt.FakeBatch("svc-outage", 0)
		a = c.do(request{method: "POST", path: "/batches?service_id=svc-outage", contentType: octet, body: list})
		code, id, _ := a.apiError()
		if a.status != http.StatusServiceUnavailable || code != 18 || id == "" {
			t.Fatalf("POST during the outage: %d %s", a.status, a.body)
		}
		// The log line of that failure carries the same request id. The instance writes it
		// before it answers, but the line reaches the test through a pipe and may come later.
		statusWarnings := 0
		testutil.WaitFor(t, 10*time.Second, fmt.Sprintf("a log line \"store batches\" with request_id %s", id), func() bool {
			found := false
			statusWarnings = 0
			for _, l := range run.logLines() {
				if l["msg"] == "store batches" && l["request_id"] == id {
					found = true
				}
				if msg, _ := l["msg"].(string); l["level"] == "WARN" && strings.HasPrefix(msg, "status page") && !strings.Contains(msg, " more like this ") {
					statusWarnings++
				}
			}
			return found
		})
		if statusWarnings > 1 {
			t.Errorf("11 status reads during the outage logged %d warnings in full, want at most 1 (the rest counted)", statusWarnings)
		}
		proxy.Restore()
		c.waitStatus("/readyz", http.StatusOK, 60*time.Second)
	})

	// Afterwards: still serving, within its memory bound, nothing of a refused request stored.
	c.waitStatus("/healthz", http.StatusOK, 10*time.Second)
	c.waitStatus("/readyz", http.StatusOK, 30*time.Second)
	_, list := dlt.FakeBatch("svc-good", 99)
	if a := c.do(request{method: "POST", path: "/batches?service_id=svc-good", contentType: octet, body: list}); a.status != http.StatusAccepted {
		t.Errorf("POST after the probes: %d %s", a.status, a.body)
	}
	peak, now := run.memKiB(t, "VmHWM"), run.memKiB(t, "VmRSS")
	t.Logf("RSS after the probes %d MiB, peak %d MiB", now>>10, peak>>10)
	if peak<<10 > hostileRSSLimit {
		t.Errorf("peak RSS %d MiB, over %d MiB", peak>>10, hostileRSSLimit>>20)
	}
	rows, err := admin.Query(ctx, `SELECT service_id, count(*) FROM batchclaim.batches GROUP BY 1 ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	stored := map[string]int64{}
	for rows.Next() {
		var svc string
		var n int64
		if err := rows.Scan(&svc, &n); err != nil {
			t.Fatal(err)
		}
		stored[svc] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for svc := range stored {
		switch svc {
		case "svc-good", "svc-pool", "svc-links", "tenant-a-secret":
		default:
			t.Errorf("%d batches stored under %+q, which only bad requests used", stored[svc], svc)
		}
	}
	if stored["svc-good"] != 6 || stored["svc-links"] != 3640 || stored["tenant-a-secret"] != 1 {
		t.Errorf("batches stored: %v", stored)
	}
	var claimRows int
	if err := admin.QueryRow(ctx, `SELECT count(*) FROM batchclaim.service_id_claims WHERE service_id NOT IN ('svc-good', 'svc-pool', 'svc-links', 'tenant-a-secret')`).Scan(&claimRows); err != nil || claimRows != 0 {
		t.Errorf("%d claim rows of service_ids only bad requests used (%v)", claimRows, err)
	}
}

// TestHostileWithTokens: an instance with a token file (readable by every user, holding a
// token longer than 64 KiB), TLS, and its ledger credential in a file.
func TestHostileWithTokens(t *testing.T) {
	t.Parallel()
	bin := testbin.Path(t)
	dir := t.TempDir()
	long := strings.Repeat("k", 70<<10)
	tokenFile := filepath.Join(dir, "tokens")
	if err := os.WriteFile(tokenFile, []byte("short-token\n"+long+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(tokenFile, 0o644); err != nil { // whatever the umask
		t.Fatal(err)
	}
	dltSecret := randomSecret(t, "dlt")
	authFile := filepath.Join(dir, "dlt-authorization")
	if err := os.WriteFile(authFile, []byte("Bearer "+dltSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cert := testcert.New(t)
	simAddr, addr := mustFreeAddr(t), mustFreeAddr(t)
	startHostile(t, bin, "dlt-sim", "--flavor", "sawtooth", "--listen", simAddr)
	waitHTTP(t, "http://"+simAddr+"/_sim/posts")
	run := startHostile(t, bin, "run", "--database-url", dbtest.NewDB(t), "--dlt-url", "http://"+simAddr,
		"--dlt-authorization-file", authFile, "--listen", addr, "--auth-token-file", tokenFile,
		"--tls-cert", cert.CertFile, "--tls-key", cert.KeyFile, "--max-header-bytes", "131072", "--log-format", "json",
		"--renew-interval", "200ms", "--expiry-1", "3s", "--expiry-2", "12s")
	c := &hostileClient{t: t, base: "https://" + addr, http: &http.Client{Timeout: time.Minute,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: cert.Pool()}}}}
	c.waitStatus("/readyz", http.StatusOK, 30*time.Second)

	t.Run("item 13: a token file every user may read is reported", func(t *testing.T) {
		// The output is copied from a pipe: the line may land a moment after it is written.
		testutil.WaitFor(t, 10*time.Second, "a warning about the token file's mode", func() bool {
			return strings.Contains(run.output(), "can be read by every user of the machine (mode 0644)")
		})
	})
	t.Run("item 13: the ledger credential is neither in ps nor in the log", func(t *testing.T) {
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", run.cmd.Process.Pid))
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(cmdline, []byte(dltSecret)) || strings.Contains(run.output(), dltSecret) {
			t.Error("the ledger credential is visible")
		}
	})
	t.Run("item 10: the status page's data needs a token", func(t *testing.T) {
		a := c.do(request{method: "GET", path: "/api/status"})
		if code, id, _ := a.apiError(); a.status != http.StatusUnauthorized || code != 80 || id == "" || bytes.Contains(a.body, []byte("svc-")) {
			t.Errorf("without a token: %d %s", a.status, a.body)
		}
		if a := c.do(request{method: "GET", path: "/api/status", token: "short-token"}); a.status != http.StatusOK {
			t.Errorf("with a token: %d %s", a.status, a.body)
		}
		if a := c.do(request{method: "GET", path: "/"}); a.status != http.StatusOK {
			t.Errorf("the page itself: %d", a.status)
		}
	})
	t.Run("item 13: a token longer than 64 KiB works", func(t *testing.T) {
		_, list := dlt.FakeBatch("svc-long-token", 0)
		if a := c.do(request{method: "POST", path: "/batches?service_id=svc-long-token", contentType: octet, body: list, token: long}); a.status != http.StatusAccepted {
			t.Errorf("%d %s", a.status, a.body)
		}
	})
	t.Run("item 13: failed TLS handshakes are not logged as warnings", func(t *testing.T) {
		for i := range 20 {
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			if i%2 == 0 {
				_, _ = conn.Write([]byte("\x16\x03\x01\x00\x05hello"))
			}
			_ = conn.Close()
		}
		c.waitStatus("/healthz", http.StatusOK, 10*time.Second)
		for _, l := range run.logLines() {
			if msg, _ := l["msg"].(string); strings.Contains(msg, "TLS handshake") && l["level"] != "DEBUG" {
				t.Fatalf("logged at %v: %s", l["level"], msg)
			}
		}
	})
	t.Run("item 13: an emptied token file revokes every token", func(t *testing.T) {
		if err := os.WriteFile(tokenFile, []byte("# all revoked\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := run.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		_, list := dlt.FakeBatch("svc-revoked", 0)
		deadline := time.Now().Add(30 * time.Second)
		for {
			a := c.do(request{method: "POST", path: "/batches?service_id=svc-revoked", contentType: octet, body: list, token: "short-token"})
			if a.status == http.StatusUnauthorized {
				break
			}
			if a.status != http.StatusAccepted || time.Now().After(deadline) {
				t.Fatalf("the old token after the file was emptied: %d %s", a.status, a.body)
			}
			time.Sleep(50 * time.Millisecond)
		}
		// The new set is in force before the reload is logged: wait for the line.
		testutil.WaitFor(t, 10*time.Second, "a warning that every token is revoked", func() bool {
			return strings.Contains(run.output(), "holds no token: every request that needs one is refused")
		})
		c.waitStatus("/readyz", http.StatusOK, 10*time.Second)
	})
}

// TestHostileCommands: flags and arguments a careless operator gives stop the process at
// start with one line naming the flag; `status` prints stored text escaped.
func TestHostileCommands(t *testing.T) {
	t.Parallel()
	bin := testbin.Path(t)
	dir := t.TempDir()
	list := filepath.Join(dir, "list")
	_, l := dlt.FakeBatch("svc", 0)
	if err := os.WriteFile(list, l, 0o600); err != nil {
		t.Fatal(err)
	}
	nowhere := "postgres://x@127.0.0.1:1/x?connect_timeout=1"
	run := []string{"run", "--database-url", nowhere, "--dlt-url", "http://127.0.0.1:1"}
	for _, p := range []struct {
		name string
		args []string
		want string
	}{
		{"item 4: a 1ms expiry", append(run, "--expiry-1", "1ms"), "--expiry-1 1ms: at least 500ms (did you mean 1m?)"},
		{"item 4: an expiry that overflows", append(run, "--expiry-1", "999999h"), "--expiry-1 999999h0m0s: at most 24h0m0s"},
		{"item 11: claims-only on every interface", append(run, "--claims-only", "--listen", "0.0.0.0:0"), "--listen 0.0.0.0:0 is not a loopback address"},
		{"item 11: an elector on every interface", []string{"election", "run", "--roles", "r", "--listen", "0.0.0.0:0", "--database-url", nowhere}, "--listen 0.0.0.0:0 is not a loopback address"},
		{"item 13: no workers", append(run, "--workers", "0"), "--workers 0: must be positive"},
		{"item 13: no body", append(run, "--max-body", "0"), "--max-body 0: must be positive"},
		{"item 13: a TLS file that is not there", append(run, "--tls-cert", filepath.Join(dir, "none.pem"), "--tls-key", filepath.Join(dir, "none.key")), "--tls-cert " + filepath.Join(dir, "none.pem")},
		{"item 13: a token file that is not there", append(run, "--auth-token-file", filepath.Join(dir, "none")), "--auth-token-file: read token file"},
		{"item 7: enqueue of a control character in a service_id", []string{"enqueue", "--service-id", "svc\x01", "--database-url", nowhere, list}, "U+0001 (a control character)"},
		{"item 8: enqueue of a CSI service_id", []string{"enqueue", "--service-id", "svc\u009b31m", "--database-url", nowhere, list}, "U+009B (a control character)"},
	} {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			out, err := exec.Command(bin, p.args...).CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(string(out), p.want) {
				t.Fatalf("%v: %v, output %q; want exit 1 and %q", p.args, err, out, p.want)
			}
			if lines := strings.Count(strings.TrimSpace(string(out)), "\n"); lines != 0 || strings.Contains(string(out), "cannot reach database") {
				t.Errorf("want one line, before the database: %q", out)
			}
		})
	}

	t.Run("item 8: status escapes what was stored before the rule", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		url := dbtest.NewDB(t)
		pool, err := pgxpool.New(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		defer pool.Close()
		if _, err := pool.Exec(ctx, `INSERT INTO batchclaim.batches (service_id, batch_id, payload) VALUES (E'svc\x1b[2J\u009b31m', 'b1', '\x00'), (E'svc\u202egpj', 'b2', '\x00')`); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(bin, "status", "--database-url", url).Output()
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range string(out) {
			if r != '\n' && (r < 0x20 || r > 0x7e) {
				t.Fatalf("status printed %U at byte %d:\n%s", r, i, out)
			}
		}
		if !bytes.Contains(out, []byte(`"svc\x1b[2J\u009b31m"`)) || !bytes.Contains(out, []byte(`"svc\u202egpj"`)) {
			t.Errorf("status lacks the escaped ids:\n%s", out)
		}
	})
}

// TestLeastPrivilegeRoles (item 12): the roles of deploy/roles.sql on an empty database. The
// schema owner migrates; `run` works as the DML-only role (ingest, submission, statuses,
// retention) and cannot change the schema; `status` and `ui` work as the read-only role,
// which cannot write.
func TestLeastPrivilegeRoles(t *testing.T) {
	t.Parallel()
	bin := testbin.Path(t)
	ctx := context.Background()
	adminURL, err := url.Parse(dbtest.AdminURL(t))
	if err != nil {
		t.Fatal(err)
	}
	suffix := strings.ToLower(randomSecret(t, "")[:8])
	dbName := "bc_roles_" + suffix
	owner, app, status := "bco_"+suffix, "bca_"+suffix, "bcs_"+suffix
	admin, err := pgxpool.New(ctx, adminURL.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c := context.Background()
		_, _ = admin.Exec(c, "DROP DATABASE IF EXISTS "+dbName+" WITH (FORCE)")
		for _, r := range []string{app, status, owner} {
			_, _ = admin.Exec(c, "DROP ROLE IF EXISTS "+r)
		}
		admin.Close()
	})
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+dbName); err != nil {
		t.Fatal(err)
	}
	roleURL := func(role string) string {
		u := *adminURL
		u.User, u.Path = url.User(role), "/"+dbName
		return u.String()
	}
	sql, err := os.ReadFile(filepath.Join("..", "..", "deploy", "roles.sql"))
	if err != nil {
		t.Fatal(err)
	}
	script := strings.NewReplacer("batchclaim_owner", owner, "batchclaim_app", app, "batchclaim_status", status).Replace(string(sql))
	db, err := pgxpool.New(ctx, roleURL(adminURL.User.Username()))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(ctx, script); err != nil {
		t.Fatalf("deploy/roles.sql: %v", err)
	}

	command := func(wantExit int, args ...string) string {
		t.Helper()
		out, err := exec.Command(bin, args...).CombinedOutput()
		code := 0
		if exit, ok := err.(*exec.ExitError); ok {
			code = exit.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if code != wantExit {
			t.Fatalf("%v: exit %d, want %d: %s", args[:2], code, wantExit, out)
		}
		return string(out)
	}
	command(0, "migrate", "up", "--database-url", roleURL(owner))

	// The roles can do what their commands need, and no more.
	for _, c := range []struct {
		role, sql string
		allowed   bool
	}{
		{app, "CREATE TABLE intruder (x int)", false},
		{app, "ALTER TABLE batchclaim.batches ADD COLUMN intruder int", false},
		{app, "DROP TABLE batchclaim.service_halts", false},
		{status, "INSERT INTO batchclaim.service_halts (service_id, seq, reason) VALUES ('x', 1, 'x')", false},
		{status, "SELECT count(*) FROM batchclaim.batches", true},
		{owner, "SELECT count(*) FROM batchclaim.batches", true},
	} {
		conn, err := pgxpool.New(ctx, roleURL(c.role))
		if err != nil {
			t.Fatal(err)
		}
		_, err = conn.Exec(ctx, c.sql)
		conn.Close()
		if (err == nil) != c.allowed {
			t.Errorf("%s as the %s role: %v, want allowed %v", c.sql, strings.TrimRight(c.role[:3], "_"), err, c.allowed)
		}
	}

	simAddr, addr := mustFreeAddr(t), mustFreeAddr(t)
	startHostile(t, bin, "dlt-sim", "--flavor", "sawtooth", "--listen", simAddr, "--commit-latency", "20ms")
	waitHTTP(t, "http://"+simAddr+"/_sim/posts")
	startHostile(t, bin, "run", "--database-url", roleURL(app), "--dlt-url", "http://"+simAddr, "--listen", addr,
		"--renew-interval", "200ms", "--expiry-1", "3s", "--expiry-2", "12s", "--poll-interval", "100ms",
		"--retention", "1ms", "--retention-interval", "500ms", "--halt-on-invalid")
	c := &hostileClient{t: t, base: "http://" + addr, http: &http.Client{Timeout: time.Minute}}
	c.waitStatus("/readyz", http.StatusOK, 30*time.Second)
	var listBytes []byte
	for i := range 5 {
		_, l := dlt.FakeBatch("svc-roles", i)
		listBytes = append(listBytes, l...)
	}
	if a := c.do(request{method: "POST", path: "/batches?service_id=svc-roles", contentType: octet, body: listBytes}); a.status != http.StatusAccepted {
		t.Fatalf("POST as the DML-only role: %d %s", a.status, a.body)
	}
	// Committed, then deleted by retention: every write of the data path ran as the role.
	deadline := time.Now().Add(60 * time.Second)
	for {
		var st struct {
			Retention struct {
				PrunedTotal int64 `json:"pruned_total"`
			} `json:"retention"`
		}
		out := command(0, "status", "--json", "--database-url", roleURL(status))
		if err := json.Unmarshal([]byte(out), &st); err != nil {
			t.Fatalf("status --json as the read-only role: %v: %s", err, out)
		}
		if st.Retention.PrunedTotal == 5 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 60s: %s", out)
		}
		time.Sleep(100 * time.Millisecond)
	}
	uiAddr := mustFreeAddr(t)
	startHostile(t, bin, "ui", "--database-url", roleURL(status), "--listen", uiAddr)
	u := &hostileClient{t: t, base: "http://" + uiAddr, http: &http.Client{Timeout: time.Minute}}
	u.waitStatus("/api/status", http.StatusOK, 30*time.Second)

	// The page's writes, as the read-only role, are refused for want of a grant: 403 naming it,
	// not 503 "try again"; the commands name it too.
	for _, w := range []struct{ path, grant string }{
		{"/api/halts/svc-roles/resume", "GRANT DELETE ON batchclaim.service_halts"},
		{"/api/batches/1/retry", "GRANT UPDATE ON batchclaim.batches"},
		{"/api/batches/1/cancel", "GRANT UPDATE ON batchclaim.batches"},
	} {
		if a := u.do(request{method: "POST", path: w.path}); a.status != http.StatusForbidden || !strings.Contains(string(a.body), "lacks "+w.grant) {
			t.Errorf("POST %s as the read-only role: %d %s; want 403 naming %q", w.path, a.status, a.body, w.grant)
		}
	}
	for _, args := range [][]string{{"resume", "svc-roles"}, {"retry", "1"}, {"cancel", "1"}} {
		out := command(1, append(args, "--database-url", roleURL(status))...)
		if !strings.Contains(out, "the database role may not do this: it lacks GRANT ") || strings.Count(strings.TrimSpace(out), "\n") != 0 {
			t.Errorf("%v as the read-only role: %q; want one line naming the grant", args, out)
		}
	}
}
