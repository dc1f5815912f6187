package httpauth

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path"
	"strings"
	"sync/atomic"

	"github.com/batchclaim/batchclaim/ingest"
)

// CodeUnauthorized is the error code of a 401 answer, in the Sawtooth error shape.
const CodeUnauthorized = 80

// ErrNoTokens means the token file holds no token.
var ErrNoTokens = errors.New("no tokens")

// Tokens is the set of accepted bearer tokens, loaded from a file. It is safe for concurrent
// use; Reload swaps the set atomically.
type Tokens struct {
	path string
	set  atomic.Pointer[[][sha256.Size]byte]
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

// Reload reads the token file again and replaces the set. On error the old set stays.
func (t *Tokens) Reload() error {
	raw, err := os.ReadFile(t.path)
	if err != nil {
		return fmt.Errorf("read token file: %w", err)
	}
	var set [][sha256.Size]byte
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		set = append(set, sha256.Sum256([]byte(line)))
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read token file %s: %w", t.path, err)
	}
	if len(set) == 0 {
		return fmt.Errorf("token file %s: %w (one token per line)", t.path, ErrNoTokens)
	}
	t.set.Store(&set)
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

// Open reports whether r may be served without a token: a GET or HEAD of a health, metrics
// or status page path.
func Open(r *http.Request) bool {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return false
	}
	p := path.Clean("/" + r.URL.Path)
	switch {
	case p == "/", p == "/healthz", p == "/readyz", p == "/metrics":
		return true
	case p == "/assets", strings.HasPrefix(p, "/assets/"), p == "/api", strings.HasPrefix(p, "/api/"):
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
