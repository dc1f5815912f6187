package httpauth_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/batchclaim/batchclaim/httpauth"
)

func writeTokens(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func setup(t *testing.T, content string) (*httpauth.Tokens, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tokens")
	writeTokens(t, path, content)
	tok, err := httpauth.LoadTokens(path)
	if err != nil {
		t.Fatal(err)
	}
	return tok, path
}

// serve runs one request through the middleware in front of a handler answering 299.
func serve(tok *httpauth.Tokens, method, target, auth string) *httptest.ResponseRecorder {
	h := tok.Middleware(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(299) }))
	r := httptest.NewRequest(method, target, nil)
	if auth != "" {
		r.Header.Set("Authorization", auth)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func TestMiddleware(t *testing.T) {
	t.Parallel()
	tok, _ := setup(t, "# operators\n  alpha-token  \n\nbeta-token\n")
	cases := []struct {
		method, target, auth string
		want                 int
	}{
		{"GET", "/healthz", "", 299},
		{"HEAD", "/readyz", "", 299},
		{"GET", "/metrics", "", 299},
		{"GET", "/", "", 299},
		{"GET", "/assets/app.js", "", 299},
		{"GET", "/api/status", "", 401},
		{"GET", "/api/status", "Bearer alpha-token", 299},
		{"GET", "/api/", "", 401},
		{"GET", "/assets/../api/status", "", 401},
		{"POST", "/batches?service_id=s", "", 401},
		{"POST", "/batches?service_id=s", "Bearer alpha-token", 299},
		{"POST", "/batches?service_id=s", "bearer beta-token", 299},
		{"POST", "/batches?service_id=s", "Bearer gamma-token", 401},
		{"POST", "/batches?service_id=s", "Bearer ", 401},
		{"POST", "/batches?service_id=s", "Basic alpha-token", 401},
		{"POST", "/batches?service_id=s", "alpha-token", 401},
		{"POST", "/batches?service_id=s", "Bearer # operators", 401},
		{"GET", "/batch_statuses?id=x", "", 401},
		{"GET", "/batch_statuses?id=x", "Bearer alpha-token", 299},
		{"POST", "/batch_statuses", "", 401},
		{"POST", "/healthz", "", 401},
		{"POST", "/api/instances", "", 401},
		{"DELETE", "/api/instances/1", "", 401},
		{"PUT", "/assets/x", "Bearer beta-token", 299},
		{"OPTIONS", "/", "", 401},
		{"GET", "/api/../batch_statuses", "", 401},
		{"GET", "/assets/../../batch_statuses", "", 401},
		{"GET", "/unknown", "", 401},
		{"GET", "/healthzz", "", 401},
	}
	for _, c := range cases {
		t.Run(c.method+" "+c.target+" "+c.auth, func(t *testing.T) {
			t.Parallel()
			w := serve(tok, c.method, c.target, c.auth)
			if w.Code != c.want {
				t.Fatalf("status %d, want %d", w.Code, c.want)
			}
			if c.want != 401 {
				return
			}
			if got := w.Header().Get("WWW-Authenticate"); got == "" {
				t.Error("401 without WWW-Authenticate")
			}
			var body struct {
				Error struct {
					Code    int    `json:"code"`
					Title   string `json:"title"`
					Message string `json:"message"`
				} `json:"error"`
			}
			if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
				t.Fatalf("body %q: %v", w.Body, err)
			}
			if body.Error.Code != httpauth.CodeUnauthorized || body.Error.Title != "Unauthorized" || body.Error.Message == "" {
				t.Errorf("error body %+v", body.Error)
			}
		})
	}
}

func TestReload(t *testing.T) {
	t.Parallel()
	t.Run("picks up a new token and drops a removed one", func(t *testing.T) {
		t.Parallel()
		tok, path := setup(t, "old\n")
		writeTokens(t, path, "new\n")
		if got := serve(tok, "POST", "/batches", "Bearer new").Code; got != 401 {
			t.Fatalf("new token accepted before reload: %d", got)
		}
		if err := tok.Reload(); err != nil {
			t.Fatal(err)
		}
		if got := serve(tok, "POST", "/batches", "Bearer new").Code; got != 299 {
			t.Errorf("new token after reload: %d", got)
		}
		if got := serve(tok, "POST", "/batches", "Bearer old").Code; got != 401 {
			t.Errorf("removed token after reload: %d", got)
		}
	})
	t.Run("an emptied file revokes every token", func(t *testing.T) {
		t.Parallel()
		tok, path := setup(t, "old\n")
		writeTokens(t, path, "# all commented out\n\n")
		if err := tok.Reload(); err != nil {
			t.Fatal(err)
		}
		if got := serve(tok, "POST", "/batches", "Bearer old").Code; got != 401 {
			t.Errorf("old token after the file was emptied: %d, want 401", got)
		}
		if p := tok.Problems(); tok.Len() != 0 || len(p) != 1 || !strings.Contains(p[0], "holds no token: every request that needs one is refused") {
			t.Errorf("%d tokens, problems %q", tok.Len(), p)
		}
	})
	t.Run("a failed reload keeps the old set", func(t *testing.T) {
		t.Parallel()
		tok, path := setup(t, "old\n")
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		if err := tok.Reload(); err == nil {
			t.Fatal("reload of a missing file succeeded")
		}
		writeTokens(t, path, strings.Repeat("x", httpauth.MaxFileSize+1))
		if err := tok.Reload(); err == nil || !strings.Contains(err.Error(), "larger than") {
			t.Fatalf("reload of an oversized file: %v", err)
		}
		if got := serve(tok, "POST", "/batches", "Bearer old").Code; got != 299 {
			t.Errorf("old token after failed reloads: %d", got)
		}
	})
}

func TestLoadTokens(t *testing.T) {
	t.Parallel()
	if _, err := httpauth.LoadTokens(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("missing file: no error")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "empty")
	writeTokens(t, path, "")
	if tok, err := httpauth.LoadTokens(path); err != nil || tok.Len() != 0 || len(tok.Problems()) != 1 {
		t.Errorf("empty file: %v, want an empty set and a problem", err)
	}

	// A token longer than any line buffer works.
	long := strings.Repeat("k", 100<<10)
	path = filepath.Join(dir, "long")
	writeTokens(t, path, "short scopes=all\n"+long+" scopes=ingest\n")
	tok, err := httpauth.LoadTokens(path)
	if err != nil || tok.Len() != 2 || len(tok.Problems()) != 0 {
		t.Fatalf("a 100 KiB token: %v, %d tokens, problems %q", err, tok.Len(), tok.Problems())
	}
	if !tok.Valid(long) || tok.Valid(long[1:]) {
		t.Error("the long token is not told apart")
	}

	// A file every user may read is loaded, with a problem to report; a group may read it
	// (Kubernetes mounts secrets for the pod's group).
	path = filepath.Join(dir, "open")
	writeTokens(t, path, "tok scopes=read\n")
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	tok, err = httpauth.LoadTokens(path)
	if err != nil || len(tok.Problems()) != 1 || !strings.Contains(tok.Problems()[0], "can be read by every user of the machine (mode 0644): chmod o-r it") {
		t.Errorf("world-readable file: %v, problems %q", err, tok.Problems())
	}
	if err := os.Chmod(path, 0o440); err != nil {
		t.Fatal(err)
	}
	if err := tok.Reload(); err != nil || len(tok.Problems()) != 0 {
		t.Errorf("group-readable file: %v, problems %q", err, tok.Problems())
	}
}

// Each token has the scopes its line names; a request needs the scope of its path, and a
// token without it gets 403 naming the scope. A line with the token alone (the old form) has
// every scope, and the file's problems say so.
func TestScopes(t *testing.T) {
	t.Parallel()
	tok, _ := setup(t, "ingester scopes=ingest\nreader scopes=read # the dashboards\noperator scopes=read,operate\n"+
		"profiler scopes=debug\nroot scopes=all\nold-form\n")
	if p := tok.Problems(); len(p) != 1 || !strings.Contains(p[0], "1 token(s) name no scopes (line 6), so each has every scope (ingest,read,operate,debug)") {
		t.Errorf("problems %q, want one about the token without scopes", p)
	}
	if !tok.Granted(httpauth.ScopeDebug) || !tok.Granted(httpauth.ScopeRead|httpauth.ScopeOperate) {
		t.Error("Granted: false for scopes a token has")
	}
	requests := []struct {
		method, target string
		need           string
	}{
		{"POST", "/batches?service_id=s", "ingest"},
		{"GET", "/batch_statuses?id=x", "ingest"},
		{"POST", "/batch_statuses", "ingest"},
		{"GET", "/api/status", "read"},
		{"GET", "/api/batches/12", "read"},
		{"HEAD", "/api/search?q=x", "read"},
		{"POST", "/api/halts/svc/resume", "operate"},
		{"POST", "/api/batches/12/retry", "operate"},
		{"POST", "/api/batches/12/cancel", "operate"},
		{"GET", "/debug/pprof/", "debug"},
		{"GET", "/debug/pprof/cmdline", "debug"},
		{"GET", "/debug/pprof/trace?seconds=1", "debug"},
		{"POST", "/debug/pprof/symbol", "debug"},
		{"GET", "/assets/../debug/pprof/heap", "debug"},
		{"GET", "/unknown", "ingest,read,operate,debug"},
		{"POST", "/healthz", "ingest,read,operate,debug"},
	}
	tokens := map[string]string{"ingester": "ingest", "reader": "read", "operator": "read,operate", "profiler": "debug",
		"root": "ingest,read,operate,debug", "old-form": "ingest,read,operate,debug"}
	for _, r := range requests {
		for token, has := range tokens {
			t.Run(r.method+" "+r.target+" as "+token, func(t *testing.T) {
				t.Parallel()
				allowed := true
				for _, s := range strings.Split(r.need, ",") {
					allowed = allowed && strings.Contains(","+has+",", ","+s+",")
				}
				w := serve(tok, r.method, r.target, "Bearer "+token)
				if allowed {
					if w.Code != 299 {
						t.Fatalf("%d %s, want it served", w.Code, w.Body)
					}
					return
				}
				var body struct {
					Error struct {
						Code    int    `json:"code"`
						Message string `json:"message"`
					} `json:"error"`
				}
				if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil || w.Code != 403 || body.Error.Code != httpauth.CodeForbidden ||
					!strings.Contains(body.Error.Message, "lacks the scope ") || !strings.Contains(body.Error.Message, "(the token's scopes: "+has+")") {
					t.Fatalf("%d %s, want 403 naming the missing scope", w.Code, w.Body)
				}
			})
		}
	}
	if w := serve(tok, "POST", "/api/batches/12/cancel", "Bearer reader"); !strings.Contains(w.Body.String(), "lacks the scope operate, which POST /api/batches/12/cancel needs") {
		t.Errorf("403 of a read token cancelling: %s", w.Body)
	}
}

// A line that is not TOKEN [scopes=LIST], or names an unknown scope, refuses the whole file
// with the line's number, and a reload keeps the set it had.
func TestScopesRefused(t *testing.T) {
	t.Parallel()
	for content, want := range map[string]string{
		"good scopes=ingest\nbad scopes=ingest,write\n": `line 2: scope "write": want a comma-separated list of ingest,read,operate,debug, or all`,
		"bad scopes=\n":                   `line 1: scope "": want`,
		"two words\n":                     "line 1: a line is TOKEN or TOKEN scopes=LIST",
		"tok scopes=read scopes=ingest\n": "line 1: a line is TOKEN or TOKEN scopes=LIST",
		"tok scope=read\n":                "line 1: a line is TOKEN or TOKEN scopes=LIST",
	} {
		path := filepath.Join(t.TempDir(), "tokens")
		writeTokens(t, path, content)
		if _, err := httpauth.LoadTokens(path); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", content, err, want)
		}
	}
	tok, path := setup(t, "kept scopes=ingest\n")
	writeTokens(t, path, "kept scopes=nonsense\n")
	if err := tok.Reload(); err == nil {
		t.Fatal("reload of a bad file succeeded")
	}
	if got := serve(tok, "POST", "/batches", "Bearer kept").Code; got != 299 {
		t.Errorf("the old set after a refused reload: %d", got)
	}
}
