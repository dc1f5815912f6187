package ui_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batchclaim/batchclaim/pgdb"
	"github.com/batchclaim/batchclaim/ui"
)

// Mounting the status page on a service's own mux, behind its own authentication: reads stay
// open, the resume POST needs a bearer token. (An instance's listener does this already; see
// package node.)
func ExampleHandler_Register() {
	cfg, _ := pgxpool.ParseConfig("postgres://postgres@127.0.0.1:5432/postgres")
	pool, _ := pgxpool.NewWithConfig(context.Background(), cfg) // connects on first use
	defer pool.Close()
	db, err := pgdb.Open(pool, "")
	if err != nil {
		fmt.Println(err)
		return
	}

	page, err := ui.New(db, ui.Config{})
	if err != nil {
		fmt.Println(err)
		return
	}
	mux := http.NewServeMux()
	page.Register(mux)
	requireToken := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method != http.MethodGet && r.Header.Get("Authorization") != "Bearer s3cret" {
				http.Error(w, "token required", http.StatusUnauthorized)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
	h := requireToken(mux)

	for _, r := range []*http.Request{
		httptest.NewRequest("GET", "/", nil),
		httptest.NewRequest("GET", "/assets/app.js", nil),
		httptest.NewRequest("POST", "/api/halts/svc-7/resume", nil),
	} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		fmt.Println(r.Method, r.URL.Path, w.Code, strings.Split(w.Header().Get("Content-Type"), ";")[0])
	}

	_, err = ui.New(db, ui.Config{Refresh: 10_000_000}) // 10ms
	fmt.Println(err)
	// Output:
	// GET / 200 text/html
	// GET /assets/app.js 200 text/javascript
	// POST /api/halts/svc-7/resume 401 text/plain
	// ui: refresh 10ms is under 100ms
}
