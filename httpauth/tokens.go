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

	"github.com/batchclaim/batchclaim/httpguard"
)

// Error codes of the middleware's answers, in the Sawtooth error shape.
const (
	// CodeUnauthorized is the code of a 401: no token, or one not in the file.
	CodeUnauthorized = 80
	// CodeForbidden is the code of a 403: a valid token without the scope the request needs.
	CodeForbidden = 83
)

// MaxFileSize bounds the token file.
const MaxFileSize = 1 << 20

// entry is one token of the file: its digest and what it may do.
type entry struct {
	sum    [sha256.Size]byte
	scopes Scope
}

// Tokens is the set of accepted bearer tokens, with their scopes, loaded from a file. It is
// safe for concurrent use; Reload swaps the set atomically.
type Tokens struct {
	path     string
	set      atomic.Pointer[[]entry]
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
// no token (every request that needs one is refused), that every user may read it, or that
// some of its tokens name no scopes (the old form: they have every scope).
func (t *Tokens) Problems() []string { return *t.problems.Load() }

// Granted reports whether some token of the set has every scope of s (a token file in which
// no token may read the profiles, say).
func (t *Tokens) Granted(s Scope) bool {
	for _, e := range *t.set.Load() {
		if e.scopes&s == s {
			return true
		}
	}
	return false
}

// Reload reads the token file again and replaces the set. A file that holds no token
// replaces it with the empty set: every request that needs a token is refused (a way to
// revoke every token at once). On error (the file cannot be read, is larger than
// MaxFileSize, or has a line that is not TOKEN [scopes=LIST]) the old set stays.
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
	set := []entry{}
	var unscoped []int
	n := 0
	for line := range strings.Lines(string(raw)) {
		n++
		token, scopes, named, err := parseLine(line)
		if err != nil {
			return fmt.Errorf("token file %s, line %d: %w", t.path, n, err)
		}
		if token == "" {
			continue
		}
		if !named {
			unscoped = append(unscoped, n)
		}
		set = append(set, entry{sha256.Sum256([]byte(token)), scopes})
	}
	var problems []string
	if len(set) == 0 {
		problems = append(problems, fmt.Sprintf("token file %s holds no token: every request that needs one is refused", t.path))
	}
	if mode := fi.Mode().Perm(); mode&0o004 != 0 {
		problems = append(problems, fmt.Sprintf("token file %s can be read by every user of the machine (mode %#o): chmod o-r it", t.path, mode))
	}
	if len(unscoped) > 0 {
		problems = append(problems, fmt.Sprintf("token file %s: %d token(s) name no scopes (line %s), so each has every scope (%s): "+
			"write each as TOKEN scopes=LIST with only the scopes its client needs (docs/operations.md, \"Token scopes\")",
			t.path, len(unscoped), lineList(unscoped), ScopesAll))
	}
	t.set.Store(&set)
	t.problems.Store(&problems)
	return nil
}

// parseLine reads one line of the token file: "TOKEN" (every scope: the old form) or
// "TOKEN scopes=LIST", optionally followed by a comment from "#"; blank lines and lines that
// start with "#" give no token. named reports whether the line named its scopes.
func parseLine(line string) (token string, scopes Scope, named bool, err error) {
	fields := strings.Fields(line)
	if len(fields) == 0 || strings.HasPrefix(fields[0], "#") {
		return "", 0, false, nil
	}
	token, scopes = fields[0], ScopesAll
	for _, f := range fields[1:] {
		if strings.HasPrefix(f, "#") {
			break
		}
		list, ok := strings.CutPrefix(f, "scopes=")
		if !ok || named {
			return "", 0, false, fmt.Errorf("a line is TOKEN or TOKEN scopes=LIST (LIST: %s, comma-separated), and a token holds no space; "+
				"the word after the token is not one scopes=", ScopesAll)
		}
		if scopes, err = ParseScopes(list); err != nil {
			return "", 0, false, err
		}
		named = true
	}
	return token, scopes, named, nil
}

// lineList is the line numbers of a problem, the first few of them.
func lineList(lines []int) string {
	const most = 5
	var parts []string
	for i, l := range lines {
		if i == most {
			parts = append(parts, "...")
			break
		}
		parts = append(parts, fmt.Sprint(l))
	}
	return strings.Join(parts, ", ")
}

// lookup gives the scopes of token: the union of those of every line that holds it. Every
// token is compared, in constant time.
func (t *Tokens) lookup(token string) (Scope, bool) {
	sum := sha256.Sum256([]byte(token))
	found, scopes := 0, 0
	for _, e := range *t.set.Load() {
		eq := subtle.ConstantTimeCompare(sum[:], e.sum[:])
		found |= eq
		scopes |= eq * int(e.scopes)
	}
	return Scope(scopes), found == 1 && token != ""
}

// Valid reports whether token is in the set, whatever its scopes.
func (t *Tokens) Valid(token string) bool {
	_, ok := t.lookup(token)
	return ok
}

// Middleware returns next guarded by the tokens (see the package documentation for which
// requests need one, and which scope).
func (t *Tokens) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if Open(r) {
			next.ServeHTTP(w, r)
			return
		}
		token, ok := bearer(r.Header.Get("Authorization"))
		scopes, valid := t.lookup(token)
		if !ok || !valid {
			w.Header().Set("WWW-Authenticate", `Bearer realm="batchclaim"`)
			msg := "This endpoint requires an 'Authorization: Bearer <token>' header with a valid token"
			if ok {
				msg = "The bearer token is not valid"
			}
			httpguard.WriteError(w, http.StatusUnauthorized, CodeUnauthorized, "Unauthorized", msg)
			return
		}
		if need := Needs(r); scopes&need != need {
			httpguard.WriteError(w, http.StatusForbidden, CodeForbidden, "Forbidden",
				fmt.Sprintf("The bearer token lacks the scope %s, which %s %s needs (the token's scopes: %s)",
					need&^scopes, r.Method, path.Clean("/"+r.URL.Path), scopes))
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
