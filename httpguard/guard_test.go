package httpguard_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/batchclaim/batchclaim/httpguard"
)

func TestHostsAllowed(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		listen string
		extra  []string
		host   string
		want   bool
	}{
		{"127.0.0.1:8080", nil, "127.0.0.1:8080", true},
		{"127.0.0.1:8080", nil, "[::1]:8080", true},
		{"127.0.0.1:8080", nil, "10.1.2.3", true},
		{"127.0.0.1:8080", nil, "localhost:8080", true},
		{"127.0.0.1:8080", nil, "LOCALHOST.:8080", true},
		{"127.0.0.1:8080", nil, "", true},
		{"127.0.0.1:8080", nil, "rebind.evil.example:8080", false},
		{"127.0.0.1:8080", nil, "rebind.evil.example", false},
		{"127.0.0.1:8080", nil, "127.0.0.1.evil.example:8080", false},
		{"127.0.0.1:8080", nil, "localhost.evil.example", false},
		{"batchclaim.internal:8080", nil, "batchclaim.internal:8080", true},
		{"batchclaim.internal:8080", nil, "other.internal:8080", false},
		{":8080", []string{"batchclaim.svc"}, "batchclaim.svc:8080", true},
		{":8080", []string{"batchclaim.svc"}, "x.batchclaim.svc:8080", false},
		{":8080", []string{".example.com"}, "example.com", true},
		{":8080", []string{".example.com"}, "a.b.example.com:443", true},
		{":8080", []string{".example.com"}, "badexample.com", false},
		{":8080", []string{".Example.com."}, "a.example.com", true},
		{":8080", []string{".example.com"}, "com", false},
		{":8080", []string{"*"}, "anything.example", true},
	} {
		h, err := httpguard.NewHosts(tt.listen, tt.extra)
		if err != nil {
			t.Fatal(err)
		}
		if got := h.Allowed(tt.host); got != tt.want {
			t.Errorf("listen %s, allowed %v: Host %q allowed = %v, want %v", tt.listen, tt.extra, tt.host, got, tt.want)
		}
	}
	// "." once made an empty suffix, and the check of any Host that is a name panicked.
	for _, bad := range []string{"http://x.example", "x.example:80", "a b", "a..b", ".", " . ", "..", "*.", "*.example.com", "x*"} {
		if _, err := httpguard.NewHosts(":8080", []string{"ok.example", bad}); err == nil {
			t.Errorf("allowed host %q accepted", bad)
		} else if !strings.Contains(err.Error(), strconv.Quote(strings.TrimSpace(bad))) {
			t.Errorf("allowed host %q: the error %q does not name it", bad, err)
		}
	}
}

type errorBody struct {
	Error struct {
		Code      int    `json:"code"`
		Title     string `json:"title"`
		Message   string `json:"message"`
		RequestID string `json:"request_id"`
	} `json:"error"`
}

func TestGuard(t *testing.T) {
	t.Parallel()
	hosts, err := httpguard.NewHosts("127.0.0.1:8080", nil)
	if err != nil {
		t.Fatal(err)
	}
	var seenID, seenHost string
	var hostOK bool
	h := httpguard.Guard{Hosts: hosts, OpenPaths: []string{"/healthz"}, CostlyGETs: []string{"/debug/pprof"}}.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seenID = httpguard.RequestID(r.Context())
		seenHost, hostOK = httpguard.Host(r.Context())
		w.WriteHeader(http.StatusNoContent)
	}))
	for _, tt := range []struct {
		name, method, path, host string
		headers                  map[string]string
		want, code               int
	}{
		{"loopback", "POST", "/batches", "127.0.0.1:8080", nil, 204, 0},
		{"rebinding", "POST", "/batches", "rebind.evil.example:8080", map[string]string{"Origin": "http://rebind.evil.example:8080"}, 421, httpguard.CodeMisdirected},
		{"rebinding GET of the status API", "GET", "/api/status", "rebind.evil.example:8080", nil, 421, httpguard.CodeMisdirected},
		{"rebinding, open path", "GET", "/healthz", "rebind.evil.example:8080", nil, 204, 0},
		{"rebinding, open path cleaned", "GET", "/x/../healthz", "rebind.evil.example:8080", nil, 204, 0},
		{"rebinding, POST to an open path", "POST", "/healthz", "rebind.evil.example:8080", nil, 421, httpguard.CodeMisdirected},
		{"same origin", "POST", "/api/halts/x/resume", "127.0.0.1:8080", map[string]string{"Origin": "http://127.0.0.1:8080"}, 204, 0},
		{"other origin", "POST", "/api/halts/x/resume", "127.0.0.1:8080", map[string]string{"Origin": "http://evil.example"}, 403, httpguard.CodeCrossOrigin},
		{"null origin", "POST", "/batches", "127.0.0.1:8080", map[string]string{"Origin": "null"}, 403, httpguard.CodeCrossOrigin},
		{"cross-site fetch", "POST", "/batches", "127.0.0.1:8080", map[string]string{"Sec-Fetch-Site": "cross-site"}, 403, httpguard.CodeCrossOrigin},
		{"cross-origin GET", "GET", "/api/status", "127.0.0.1:8080", map[string]string{"Origin": "http://evil.example"}, 204, 0},
		{"cross-site GET", "GET", "/api/status", "127.0.0.1:8080", map[string]string{"Sec-Fetch-Site": "cross-site"}, 204, 0},
		{"costly GET from another site (an <img> of a page)", "GET", "/debug/pprof/trace?seconds=30", "127.0.0.1:8080", map[string]string{"Sec-Fetch-Site": "cross-site"}, 403, httpguard.CodeCrossOrigin},
		{"costly GET from the same site, another port", "GET", "/debug/pprof/profile", "127.0.0.1:8080", map[string]string{"Sec-Fetch-Site": "same-site"}, 403, httpguard.CodeCrossOrigin},
		{"costly GET by fetch from another origin", "GET", "/debug/pprof/heap", "127.0.0.1:8080", map[string]string{"Origin": "http://evil.example"}, 403, httpguard.CodeCrossOrigin},
		{"costly GET cleaned", "HEAD", "/x/../debug/pprof/trace", "127.0.0.1:8080", map[string]string{"Sec-Fetch-Site": "cross-site"}, 403, httpguard.CodeCrossOrigin},
		{"costly GET typed in", "GET", "/debug/pprof/trace", "127.0.0.1:8080", map[string]string{"Sec-Fetch-Site": "none"}, 204, 0},
		{"costly GET from the listener's own page", "GET", "/debug/pprof/", "127.0.0.1:8080", map[string]string{"Sec-Fetch-Site": "same-origin"}, 204, 0},
		{"costly GET by a client that is no browser", "GET", "/debug/pprof/profile", "127.0.0.1:8080", nil, 204, 0},
	} {
		req := httptest.NewRequest(tt.method, "http://x"+tt.path, nil)
		req.Host = tt.host
		for k, v := range tt.headers {
			req.Header.Set(k, v)
		}
		rec := httptest.NewRecorder()
		seenID, seenHost, hostOK = "", "", false
		h.ServeHTTP(rec, req)
		id := rec.Header().Get(httpguard.HeaderRequestID)
		if rec.Code != tt.want || id == "" {
			t.Errorf("%s: %d (request id %q), want %d and an id", tt.name, rec.Code, id, tt.want)
			continue
		}
		if tt.want != 204 {
			var e errorBody
			if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Error.Code != tt.code || e.Error.RequestID != id {
				t.Errorf("%s: body %s (%v), want code %d and request id %s", tt.name, rec.Body, err, tt.code, id)
			}
			continue
		}
		if seenID != id {
			t.Errorf("%s: the handler saw request id %q, the answer carries %q", tt.name, seenID, id)
		}
		if wantHost := tt.path != "/healthz" && !strings.HasSuffix(tt.path, "/healthz"); hostOK != wantHost || (hostOK && seenHost != tt.host) {
			t.Errorf("%s: checked host %q, %v; want %v", tt.name, seenHost, hostOK, wantHost)
		}
	}

	// A safe client id is kept; anything else is replaced.
	for given, keep := range map[string]bool{"abc-123_x.y:z": true, strings.Repeat("a", 64): true, strings.Repeat("a", 65): false, "a b": false, "\x1b[31m": false, "é": false} {
		req := httptest.NewRequest("GET", "http://127.0.0.1/", nil)
		req.Header.Set(httpguard.HeaderRequestID, given)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if got := rec.Header().Get(httpguard.HeaderRequestID); (got == given) != keep || got == "" {
			t.Errorf("client request id %q: answered %q, kept %v, want kept %v", given, got, got == given, keep)
		}
	}
}

func TestLoggerAndErrorLog(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	base := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	h := httpguard.Guard{}.Wrap(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		httpguard.Logger(r.Context(), base).Info("inside")
	}))
	req := httptest.NewRequest("GET", "http://127.0.0.1/", nil)
	req.Header.Set(httpguard.HeaderRequestID, "req-42")
	h.ServeHTTP(httptest.NewRecorder(), req)
	if !strings.Contains(buf.String(), "msg=inside request_id=req-42") {
		t.Errorf("log line %q lacks the request id", buf.String())
	}

	buf.Reset()
	el := httpguard.ErrorLog(base)
	el.Print("http: TLS handshake error from 127.0.0.1:5555: EOF")
	el.Print("http: Accept error: too many open files")
	if strings.Contains(buf.String(), "handshake") || !strings.Contains(buf.String(), "level=WARN msg=\"http: Accept error") {
		t.Errorf("error log at info level wrote %q: want the accept error at warn, the handshake not at all", buf.String())
	}
}
