package httpauth

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"io"
	"net/http"
	"os"
	"path"
	"strings"
	"sync/atomic"

	"github.com/batchclaim/batchclaim/ingest"
)

// CodeUnauthorized is the error code of a 401 answer, in the Sawtooth error shape.
const CodeUnauthorized = 80

// MaxFileSize bounds the token file.
const MaxFileSize = 1 << 20

// Tokens is the set of accepted bearer tokens, loaded from a file. It is safe for concurrent
// use; Reload swaps the set atomically.
type Tokens struct {
	path     string
	set      atomic.Pointer[[][sha256.Size]byte]
	problems atomic.Pointer[[]string]
}

// LoadTokens reads the token file at path.
func LoadTokens(path string) (*Tokens, error) {
	t := &Tokens{path: path}
	if err := t.Reload(); err != nil {
		return nil, err
	}
	return t, nil
}

// Path is the token file's path.
func (t *Tokens) Path() string { return t.path }

// Len is the number of tokens in the set.
func (t *Tokens) Len() int { return len(*t.set.Load()) }

// Problems are what an operator should hear about the file as last loaded: that it holds
// no token (every request that needs one is refused), or that every user may read it.
func (t *Tokens) Problems() []string { return *t.problems.Load() }

// Reload reads the token file again and replaces the set. A file that holds no token
// replaces it with the empty set: every request that needs a token is refused (a way to
// revoke every token at once). On error (the file cannot be read, or is larger than
// MaxFileSize) the old set stays.
func (t *Tokens) Reload() error {
	f, err := os.Open(t.path)
	if err != nil {
		return fmt.Errorf("read token file: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("read token file: %w", err)
	}
	raw, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return fmt.Errorf("read token file %s: %w", t.path, err)
	}
	if len(raw) > MaxFileSize {
		return fmt.Errorf("token file %s is larger than %d bytes", t.path, MaxFileSize)
	}
	set := [][sha256.Size]byte{}
	for line := range strings.Lines(string(raw)) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		set = append(set, sha256.Sum256([]byte(line)))
	}
	var problems []string
	if len(set) == 0 {
		problems = append(problems, fmt.Sprintf("token file %s holds no token: every request that needs one is refused", t.path))
	}
	if mode := fi.Mode().Perm(); mode&0o004 != 0 {
		problems = append(problems, fmt.Sprintf("token file %s can be read by every user of the machine (mode %#o): chmod o-r it", t.path, mode))
	}
	t.set.Store(&set)
	t.problems.Store(&problems)
	return nil
}

// Valid reports whether token is in the set. Every token is compared, in constant time.
func (t *Tokens) Valid(token string) bool {
	sum := sha256.Sum256([]byte(token))
	ok := 0
	for _, s := range *t.set.Load() {
		ok |= subtle.ConstantTimeCompare(sum[:], s[:])
	}
	return ok == 1 && token != ""
}

// Middleware returns next guarded by the tokens (see the package documentation for which
// requests need one).
func (t *Tokens) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if Open(r) {
			next.ServeHTTP(w, r)
			return
		}
		token, ok := bearer(r.Header.Get("Authorization"))
		if !ok || !t.Valid(token) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="batchclaim"`)
			msg := "This endpoint requires an 'Authorization: Bearer <token>' header with a valid token"
			if ok {
				msg = "The bearer token is not valid"
			}
			ingest.WriteError(w, http.StatusUnauthorized, CodeUnauthorized, "Unauthorized", msg)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// Open reports whether r may be served without a token: a GET or HEAD of health,
// readiness, metrics (aggregates only), or the status page's HTML and assets. The status
// page's data (/api/...) names service_ids and batch ids, like the ingest API, and needs a
// token.
func Open(r *http.Request) bool {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return false
	}
	p := path.Clean("/" + r.URL.Path)
	switch {
	case p == "/", p == "/healthz", p == "/readyz", p == "/metrics":
		return true
	case p == "/assets", strings.HasPrefix(p, "/assets/"):
		return true
	}
	return false
}

// bearer extracts the token of an "Authorization: Bearer <token>" header value. The scheme
// is case-insensitive (RFC 7235).
func bearer(h string) (string, bool) {
	scheme, token, ok := strings.Cut(strings.TrimSpace(h), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}
