package httpguard

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"path"
	"strings"
)

// Error codes of the guard's answers, in the Sawtooth error shape.
const (
	CodeBusy        = 31 // 503 with Retry-After: a limit is reached (here: a connection of the probe reserve asked for more than a probe)
	CodeMisdirected = 81 // 421: the Host header names a host this listener does not answer to
	CodeCrossOrigin = 82 // 403: a state-changing request from another origin, or a costly GET from another site
)

// HeaderRequestID carries the request id, both ways.
const HeaderRequestID = "X-Request-Id"

// Hosts is the set of names a listener answers to (see the package documentation).
type Hosts struct {
	any      bool
	names    map[string]bool
	suffixes []string // ".example.com" matches example.com and its subdomains; never just "."
}

// NewHosts returns the hosts a listener on listen (host:port) answers to: IP literals,
// localhost, listen's host when it is a name, and extra. An entry of extra that is "*"
// allows every host; one that starts with a dot allows that domain and its subdomains. An
// entry that is no host name (with a scheme or a port, "*" within it, "." alone) is an error.
func NewHosts(listen string, extra []string) (*Hosts, error) {
	h := &Hosts{names: map[string]bool{"localhost": true}}
	if host, _, err := net.SplitHostPort(listen); err == nil && host != "" && net.ParseIP(host) == nil {
		h.names[canonical(host)] = true
	}
	for _, e := range extra {
		e = strings.TrimSpace(e)
		switch {
		case e == "":
		case e == "*":
			h.any = true
		case strings.ContainsAny(e, "/:@ ") || strings.Contains(e, ".."):
			return nil, fmt.Errorf("allowed host %q: want a host name without scheme or port, \".domain\" for a domain and its subdomains, or *", e)
		case strings.Contains(e, "*"):
			// "*.example.com" would be a name no Host matches; "*" is a wildcard only alone.
			return nil, fmt.Errorf("allowed host %q: * allows every host only alone; for a domain and its subdomains give \".domain\"", e)
		case strings.TrimPrefix(canonical(e), ".") == "":
			// "." would leave an empty suffix, without the dot Allowed strips.
			return nil, fmt.Errorf("allowed host %q names no host: want a host name, \".domain\" for a domain and its subdomains, or *", e)
		case strings.HasPrefix(e, "."):
			h.suffixes = append(h.suffixes, canonical(e))
		default:
			h.names[canonical(e)] = true
		}
	}
	return h, nil
}

// LoopbackOnly reports whether a listener on addr (host:port) accepts connections from this
// machine only. An empty host (":8080") means every interface; a host name other than
// localhost is not trusted to stay on the loopback.
func LoopbackOnly(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func canonical(host string) string { return strings.TrimSuffix(strings.ToLower(host), ".") }

// Allowed reports whether a request whose Host header is hostport may be served. An empty
// Host (HTTP/1.0) is allowed: browsers always send one.
func (h *Hosts) Allowed(hostport string) bool {
	if h == nil || h.any || hostport == "" {
		return true
	}
	host := hostport
	if hh, _, err := net.SplitHostPort(hostport); err == nil {
		host = hh
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if net.ParseIP(host) != nil {
		return true
	}
	host = canonical(host)
	if h.names[host] {
		return true
	}
	for _, s := range h.suffixes {
		if host == s[1:] || strings.HasSuffix(host, s) {
			return true
		}
	}
	return false
}

// Guard puts the request id, the host check and the cross-origin refusal in front of a
// handler.
type Guard struct {
	// Hosts the listener answers to; nil answers to every host.
	Hosts *Hosts
	// OpenPaths skip the host check for GET and HEAD (health, readiness, metrics), and are
	// what a connection of the probe reserve (LimitConns) may ask for.
	OpenPaths []string
	// CostlyGETs are path prefixes whose GET and HEAD do work (the profiles under
	// /debug/pprof/ run for the seconds asked): from a browser on another site they are
	// refused like a write, so that a page cannot make the listener run them.
	CostlyGETs []string
}

type ctxKey int

const (
	keyRequestID ctxKey = iota
	keyHost
)

// Wrap returns next behind the guard.
func (g Guard) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := requestID(r.Header.Get(HeaderRequestID))
		w.Header().Set(HeaderRequestID, id)
		ctx := context.WithValue(r.Context(), keyRequestID, id)
		read := r.Method == http.MethodGet || r.Method == http.MethodHead
		open := read && g.open(r.URL.Path)
		probe := onProbeConn(r.Context())
		if probe {
			w.Header().Set("Connection", "close") // the reserve's connections serve one request each
		}
		switch {
		case probe && !open:
			w.Header().Set("Retry-After", "1")
			WriteError(w, http.StatusServiceUnavailable, CodeBusy, "Too Many Connections",
				"This listener holds its limit of connections; the ones beyond it serve only health, readiness and metrics; try again shortly")
			return
		case !open && !g.Hosts.Allowed(r.Host):
			WriteError(w, http.StatusMisdirectedRequest, CodeMisdirected, "Misdirected Request",
				"This server does not answer to the host named in the request; its operator can allow the name with --allowed-hosts")
			return
		case !read && crossOrigin(r, false):
			WriteError(w, http.StatusForbidden, CodeCrossOrigin, "Cross-Origin Request Refused",
				"A browser request from another origin may not change anything here")
			return
		case read && g.costly(r.URL.Path) && crossOrigin(r, true):
			WriteError(w, http.StatusForbidden, CodeCrossOrigin, "Cross-Origin Request Refused",
				"A browser request from another site may not start work here")
			return
		}
		if g.Hosts != nil && !g.Hosts.any && !open {
			ctx = context.WithValue(ctx, keyHost, r.Host)
		}
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

func (g Guard) open(p string) bool {
	p = path.Clean("/" + p)
	for _, o := range g.OpenPaths {
		if p == o {
			return true
		}
	}
	return false
}

// costly reports whether p is under one of CostlyGETs.
func (g Guard) costly(p string) bool {
	p = path.Clean("/" + p)
	for _, c := range g.CostlyGETs {
		if p == c || strings.HasPrefix(p, strings.TrimSuffix(c, "/")+"/") {
			return true
		}
	}
	return false
}

// crossOrigin reports a request that a browser sent from another origin: a write (any
// method but OPTIONS, which only asks), or with strict a GET that must come from the
// listener's own pages or an address typed in (Sec-Fetch-Site same-origin or none).
func crossOrigin(r *http.Request, strict bool) bool {
	if r.Method == http.MethodOptions {
		return false
	}
	switch site := r.Header.Get("Sec-Fetch-Site"); {
	case site == "cross-site":
		return true
	case strict && site != "" && site != "same-origin" && site != "none":
		return true
	}
	o := r.Header.Get("Origin")
	if o == "" {
		return false
	}
	u, err := url.Parse(o)
	return err != nil || u.Host == "" || !strings.EqualFold(u.Host, r.Host)
}

// requestID is the client's id when it is safe to log and echo, else a new random one.
func requestID(given string) string {
	if n := len(given); n > 0 && n <= 64 && strings.Trim(given, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._:-") == "" {
		return given
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// RequestID is the id of the request whose context is ctx, or "" outside a guarded request.
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(keyRequestID).(string)
	return id
}

// Host is the request's Host header once the guard has checked it against its Hosts, so
// that it may be used to build links; ok is false when nothing checked it.
func Host(ctx context.Context) (host string, ok bool) {
	host, ok = ctx.Value(keyHost).(string)
	return host, ok
}

// Logger returns l with the request id of ctx on every line (l itself outside a guarded
// request).
func Logger(ctx context.Context, l *slog.Logger) *slog.Logger {
	if id := RequestID(ctx); id != "" {
		return l.With("request_id", id)
	}
	return l
}

// apiError is the Sawtooth REST API's error body, with the request id.
type apiError struct {
	Code      int    `json:"code"`
	Title     string `json:"title"`
	Message   string `json:"message"`
	RequestID string `json:"request_id,omitempty"`
}

// WriteError answers status with {"error":{"code","title","message","request_id"}}, the
// Sawtooth REST API's error shape plus the request id the guard set on w.
func WriteError(w http.ResponseWriter, status, code int, title, message string) {
	WriteJSON(w, status, map[string]apiError{"error": {code, title, message, w.Header().Get(HeaderRequestID)}})
}

// WriteJSON answers status with v as JSON.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	JSONHeader(w, status)
	_ = json.NewEncoder(w).Encode(v)
}

// JSONHeader writes the headers of a JSON answer with status, for a handler that then
// writes the body itself, as it is made.
func JSONHeader(w http.ResponseWriter, status int) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
}

// ErrorLog is an http.Server's ErrorLog writing to l: failed TLS handshakes (any client can
// cause one per connection) at debug level, everything else at warn.
func ErrorLog(l *slog.Logger) *log.Logger {
	return log.New(errorLogWriter{l}, "", 0)
}

type errorLogWriter struct{ l *slog.Logger }

func (e errorLogWriter) Write(p []byte) (int, error) {
	msg := strings.TrimSpace(string(p))
	if strings.Contains(msg, "TLS handshake error") {
		e.l.Debug(msg)
	} else {
		e.l.Warn(msg)
	}
	return len(p), nil
}
