package httpguard_test

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/pprof"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/batchclaim/batchclaim/httpguard"
	"github.com/batchclaim/batchclaim/testkit/testutil"
)

// start serves h through Listen on a free loopback port with cfg's limits.
func start(t *testing.T, cfg httpguard.Config, h http.HandlerFunc) string {
	t.Helper()
	cfg.Addr, cfg.Handler = "127.0.0.1:0", h
	srv, addr, err := httpguard.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	return addr
}

// closedWithin reports whether the server closes c (a read ends in EOF or a reset) before
// wait passes; wait is a deadline, not a measure.
func closedWithin(c net.Conn, wait time.Duration) bool {
	_ = c.SetReadDeadline(time.Now().Add(wait))
	_, err := io.Copy(io.Discard, c)
	var ne net.Error
	return !(errors.As(err, &ne) && ne.Timeout())
}

// A server from Listen has the guard in front of its handler: DNS rebinding gets 421, a
// cross-site write 403, and the handler never runs for either.
func TestListenGuards(t *testing.T) {
	t.Parallel()
	ran := make(chan struct{}, 10)
	addr := start(t, httpguard.Config{OpenPaths: []string{"/healthz"}}, func(w http.ResponseWriter, _ *http.Request) {
		ran <- struct{}{}
		w.WriteHeader(http.StatusNoContent)
	})
	for _, tt := range []struct {
		name, method, path, host string
		headers                  map[string]string
		want                     int
	}{
		{"loopback", "POST", "/heartbeat", addr, nil, 204},
		{"rebinding", "POST", "/heartbeat", "rebind.evil.example", map[string]string{"Origin": "http://rebind.evil.example", "Sec-Fetch-Site": "cross-site"}, 421},
		{"cross-site write", "POST", "/heartbeat", addr, map[string]string{"Origin": "http://rebind.evil.example", "Sec-Fetch-Site": "cross-site"}, 403},
		{"open path under any name", "GET", "/healthz", "rebind.evil.example", nil, 204},
	} {
		req, err := http.NewRequest(tt.method, "http://"+addr+tt.path, strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		req.Host = tt.host
		req.Header.Set("Content-Type", "text/plain")
		for k, v := range tt.headers {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		handled := len(ran) > 0
		for len(ran) > 0 {
			<-ran
		}
		if resp.StatusCode != tt.want || handled != (tt.want == 204) {
			t.Errorf("%s: %d, handler ran %v; want %d", tt.name, resp.StatusCode, handled, tt.want)
		}
	}
}

// The limits hold: a client that stops sending its headers, or its body, is cut off; an idle
// keep-alive connection is closed; a header block over MaxHeaderBytes gets 431.
func TestListenLimits(t *testing.T) {
	t.Parallel()
	bodyErr := make(chan error, 1)
	addr := start(t, httpguard.Config{ReadHeaderTimeout: 100 * time.Millisecond, ReadTimeout: 300 * time.Millisecond,
		IdleTimeout: 100 * time.Millisecond, MaxHeaderBytes: 4 << 10},
		func(w http.ResponseWriter, r *http.Request) {
			_, err := io.ReadAll(r.Body)
			if r.ContentLength > 0 {
				bodyErr <- err
			}
			w.WriteHeader(http.StatusNoContent)
		})
	dial := func() net.Conn {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}

	headers := dial()
	_, _ = io.WriteString(headers, "POST /x HTTP/1.1\r\nHost: 127.0.0.1\r\n")
	if !closedWithin(headers, 10*time.Second) {
		t.Error("a connection that never finished its headers was still open after 10s (ReadHeaderTimeout 100ms)")
	}

	body := dial()
	_, _ = io.WriteString(body, "POST /x HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\nx")
	select {
	case err := <-bodyErr:
		if err == nil {
			t.Error("a body of 1 byte of 100 was read without an error")
		}
	case <-time.After(10 * time.Second):
		t.Error("a body that stopped after 1 byte was still being read after 10s (ReadTimeout 300ms)")
	}

	idle := dial()
	_, _ = io.WriteString(idle, "GET /x HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(idle), nil)
	if err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("a plain GET: %v, %v", resp, err)
	}
	if !closedWithin(idle, 10*time.Second) {
		t.Error("an idle keep-alive connection was still open after 10s (IdleTimeout 100ms)")
	}

	req, _ := http.NewRequest("GET", "http://"+addr+"/x", nil)
	req.Header.Set("X-Big", strings.Repeat("a", 16<<10))
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("a 16 KiB header with MaxHeaderBytes 4 KiB: %v, %v; want 431", resp, err)
	} else {
		resp.Body.Close()
	}
}

// Beyond MaxConnections a connection is closed as soon as it is accepted; once one closes,
// the next is served.
func TestListenConnectionLimit(t *testing.T) {
	t.Parallel()
	addr := start(t, httpguard.Config{MaxConnections: 2}, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	var held []net.Conn
	for range 2 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		held = append(held, c)
	}
	get := func() error {
		client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
		resp, err := client.Get("http://" + addr + "/x")
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	testutil.WaitFor(t, 10*time.Second, "a third connection refused", func() bool { return get() != nil })
	_ = held[0].Close()
	testutil.WaitFor(t, 10*time.Second, "a connection served once one closed", func() bool { return get() == nil })
}

// Listen refuses a configuration without a handler, with a negative limit or a bad allowed
// host, before it listens.
func TestListenRefusesBadConfig(t *testing.T) {
	t.Parallel()
	h := http.NotFoundHandler()
	for _, cfg := range []httpguard.Config{
		{Addr: "127.0.0.1:0"},
		{Addr: "127.0.0.1:0", Handler: h, ReadTimeout: -1},
		{Addr: "127.0.0.1:0", Handler: h, WriteTimeout: -1},
		{Addr: "127.0.0.1:0", Handler: h, MaxConnections: -1},
		{Addr: "127.0.0.1:0", Handler: h, AllowedHosts: []string{"http://x.example"}},
	} {
		if _, ln, err := httpguard.Listen(cfg); err == nil {
			_ = ln.Close()
			t.Errorf("%+v: accepted", cfg)
		}
	}
}

// Clients that hold every connection of MaxConnections (slow bodies) do not make the
// listener look dead: ProbeConnections more connections are served for the open paths, and
// one of them asking for anything else gets 503 with code 31 and is closed; a reserve
// connection that sends nothing is closed within ProbeTimeout. Without open paths there is
// no reserve.
func TestListenProbeReserve(t *testing.T) {
	t.Parallel()
	addr := start(t, httpguard.Config{MaxConnections: 2, OpenPaths: []string{"/healthz"}}, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusNoContent)
	})
	for range 2 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		_, _ = io.WriteString(c, "POST /x HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\nx")
	}
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	get := func(method, path string) (*http.Response, error) {
		req, _ := http.NewRequest(method, "http://"+addr+path, nil)
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		return resp, err
	}
	// The two slow bodies are accepted before any probe (one at a time, in order).
	testutil.WaitFor(t, 10*time.Second, "a write refused on a reserve connection", func() bool {
		resp, err := get("POST", "/x")
		return err == nil && resp.StatusCode == http.StatusServiceUnavailable
	})
	resp, err := get("POST", "/x")
	if err != nil || resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "1" || !resp.Close {
		t.Fatalf("a write beyond MaxConnections: %v %v; want 503, Retry-After and the connection closed", resp, err)
	}
	for range 20 {
		if resp, err := get("GET", "/healthz"); err != nil || resp.StatusCode != http.StatusNoContent {
			t.Fatalf("a probe while the slow bodies hold every connection: %v %v", resp, err)
		}
	}
	idle, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = idle.Close() })
	if !closedWithin(idle, httpguard.ProbeTimeout+5*time.Second) {
		t.Errorf("a reserve connection that sent nothing was open after %s", httpguard.ProbeTimeout+5*time.Second)
	}
	for range httpguard.ProbeConnections { // the whole reserve, held
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
	}
	beyond, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = beyond.Close() })
	if !closedWithin(beyond, 2*time.Second) {
		t.Errorf("a connection beyond MaxConnections and the reserve was not closed at once")
	}
}

// A client that pipelines requests for a large answer and never reads fills the sockets'
// buffers, and the server's write blocks: WriteTimeout ends it and closes the connection, so
// that with MaxConnections 1 the next client is served. Without a write timeout the
// connection was held for ever, and every later one closed as soon as it was accepted.
func TestListenWriteTimeout(t *testing.T) {
	t.Parallel()
	big := bytes.Repeat([]byte("x"), 1<<20)
	serving := make(chan struct{}, 1)
	addr := start(t, httpguard.Config{MaxConnections: 1, WriteTimeout: 200 * time.Millisecond}, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/big" {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		select {
		case serving <- struct{}{}:
		default:
		}
		_, _ = w.Write(big)
	})
	hog, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hog.Close() })
	// 64 MiB of answers asked for: far more than the two sockets' buffers hold.
	if _, err := io.WriteString(hog, strings.Repeat("GET /big HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 64)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-serving: // the hog holds the only connection
	case <-time.After(10 * time.Second):
		t.Fatal("the pipelined requests were not served within 10s")
	}
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	testutil.WaitFor(t, 10*time.Second, "a request served once the write to a client that never reads timed out", func() bool {
		resp, err := client.Get("http://" + addr + "/small")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusNoContent
	})
	if !closedWithin(hog, 10*time.Second) {
		t.Error("the connection of the client that never reads was still open")
	}
}

// A handler that works for the seconds asked before it answers is served under a shorter
// write timeout behind LimitSeconds, which extends the deadline; more seconds than its
// maximum get 400. The runtime's execution trace, which writes while it runs, is served the
// same way.
func TestLimitSeconds(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	mux.Handle("GET /wait", httpguard.LimitSeconds(5*time.Second, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s, _ := strconv.ParseFloat(r.FormValue("seconds"), 64)
		time.Sleep(time.Duration(s * float64(time.Second)))
		_, _ = io.WriteString(w, "done")
	})))
	mux.Handle("GET /debug/pprof/trace", httpguard.LimitSeconds(5*time.Second, http.HandlerFunc(pprof.Trace)))
	// The work outlasts the write timeout twice over; the second left after it is slack for a
	// loaded machine.
	addr := start(t, httpguard.Config{WriteTimeout: time.Second}, mux.ServeHTTP)
	client := &http.Client{Timeout: 10 * time.Second}
	get := func(path string) (int, string, error) {
		resp, err := client.Get("http://" + addr + path)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body), err
	}
	if code, body, err := get("/wait?seconds=2"); err != nil || code != http.StatusOK || body != "done" {
		t.Errorf("2s of work under a 1s write timeout: %d %q %v; want 200 done", code, body, err)
	}
	for _, path := range []string{"/wait?seconds=6", "/wait?seconds=Inf", "/debug/pprof/trace?seconds=6"} {
		if code, body, err := get(path); err != nil || code != http.StatusBadRequest || !strings.Contains(body, "at most 5 here") {
			t.Errorf("GET %s with at most 5s: %d %q %v; want 400", path, code, body, err)
		}
	}
	if code, body, err := get("/debug/pprof/trace?seconds=2"); err != nil || code != http.StatusOK || len(body) == 0 {
		t.Errorf("a trace of 2s under a 1s write timeout: %d, %d bytes, %v; want 200 and the trace", code, len(body), err)
	}
}
