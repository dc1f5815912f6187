package httpauth

import (
	"fmt"
	"net/http"
	"path"
	"strings"
)

// Scope is what a token may do: a set of the scopes below.
type Scope uint8

// The scopes. A request needs exactly one of them (Needs); a token holds any set.
const (
	// ScopeIngest: the ingest API, POST /batches and GET or POST /batch_statuses.
	ScopeIngest Scope = 1 << iota
	// ScopeRead: the status page's data, GET /api/... (it names service_ids and batch ids).
	ScopeRead
	// ScopeOperate: the status page's writes, POST /api/halts/{id}/resume and
	// /api/batches/{seq}/retry and /cancel, and any other write under /api/.
	ScopeOperate
	// ScopeDebug: the runtime's profiles under /debug/pprof/ (run --pprof).
	ScopeDebug

	// ScopesAll is every scope: the scopes of a token whose line names none (the old form),
	// and what a path no scope names needs (closed by default).
	ScopesAll = ScopeIngest | ScopeRead | ScopeOperate | ScopeDebug
)

var scopeNames = []struct {
	s    Scope
	name string
}{{ScopeIngest, "ingest"}, {ScopeRead, "read"}, {ScopeOperate, "operate"}, {ScopeDebug, "debug"}}

// String is the scopes' names, comma-separated ("ingest,read"), or "none".
func (s Scope) String() string {
	var names []string
	for _, n := range scopeNames {
		if s&n.s != 0 {
			names = append(names, n.name)
		}
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ",")
}

// ParseScopes reads a comma-separated list of scope names (ingest, read, operate, debug, or
// all for every one). An empty list or an unknown name is an error naming the known ones.
func ParseScopes(list string) (Scope, error) {
	var s Scope
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		if name == "all" {
			s |= ScopesAll
			continue
		}
		found := false
		for _, n := range scopeNames {
			if n.name == name {
				s |= n.s
				found = true
			}
		}
		if !found {
			return 0, fmt.Errorf("scope %q: want a comma-separated list of %s, or all", name, ScopesAll)
		}
	}
	return s, nil
}

// Needs is the scope a request needs, by its cleaned path and method:
//
//	/batches, /batch_statuses         ScopeIngest
//	GET or HEAD /api/...              ScopeRead
//	any other method on /api/...      ScopeOperate
//	/debug/pprof, /debug/pprof/...    ScopeDebug
//	anything else                     ScopesAll (a path no scope names is closed by default)
//
// Requests that Open lets through need none; Needs is not asked about them.
func Needs(r *http.Request) Scope {
	p := path.Clean("/" + r.URL.Path)
	read := r.Method == http.MethodGet || r.Method == http.MethodHead
	switch {
	case p == "/batches", p == "/batch_statuses":
		return ScopeIngest
	case strings.HasPrefix(p, "/api/") && read:
		return ScopeRead
	case strings.HasPrefix(p, "/api/"):
		return ScopeOperate
	case p == "/debug/pprof", strings.HasPrefix(p, "/debug/pprof/"):
		return ScopeDebug
	}
	return ScopesAll
}
