package httpauth_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/batchclaim/batchclaim/internal/httpauth"
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
	writeTokens(t, path, "short\n"+long+"\n")
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
	writeTokens(t, path, "tok\n")
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
