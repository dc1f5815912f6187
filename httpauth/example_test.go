package httpauth_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"

	"github.com/batchclaim/batchclaim/httpauth"
)

// Guard a mux: the health check stays open, the ingest API needs a token.
func ExampleTokens_Middleware() {
	dir, _ := os.MkdirTemp("", "tokens")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "tokens")
	_ = os.WriteFile(path, []byte("s3cret\n"), 0o600)
	tokens, err := httpauth.LoadTokens(path)
	if err != nil {
		fmt.Println(err)
		return
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("POST /batches", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusAccepted) })
	h := tokens.Middleware(mux)

	for _, auth := range []string{"", "Bearer wrong", "Bearer s3cret"} {
		r := httptest.NewRequest("POST", "/batches", nil)
		if auth != "" {
			r.Header.Set("Authorization", auth)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		fmt.Println(strings.TrimSpace(fmt.Sprintf("POST /batches %-15q %d %s", auth, w.Code, w.Body)))
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/healthz", nil))
	fmt.Println("GET /healthz", w.Code)
	// Output:
	// POST /batches ""              401 {"error":{"code":80,"title":"Unauthorized","message":"This endpoint requires an 'Authorization: Bearer \u003ctoken\u003e' header with a valid token"}}
	// POST /batches "Bearer wrong"  401 {"error":{"code":80,"title":"Unauthorized","message":"The bearer token is not valid"}}
	// POST /batches "Bearer s3cret" 202
	// GET /healthz 200
}
