package ui_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batchclaim/batchclaim/httpguard"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
	"github.com/batchclaim/batchclaim/testkit/testutil"
	"github.com/batchclaim/batchclaim/ui"
)

// During a database outage every read and write of the page fails; 1,000 requests to each of
// its routes write a bounded number of log lines per route (a line, then a count per
// interval), not one each, and every request is answered 503.
func TestOutageLogsAreBounded(t *testing.T) {
	t.Parallel()
	pool, err := pgxpool.New(context.Background(), "postgres://nobody@127.0.0.1:1/none?connect_timeout=1") // nothing listens there
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	var logs testutil.SyncBuffer
	h, err := ui.New(dbtest.Open(t, pool, ""), ui.Config{Refresh: 100 * time.Millisecond, Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	h.Register(mux)
	handler := httpguard.Guard{}.Wrap(mux)
	start := time.Now()
	sites := []struct{ msg, method, target string }{
		{"status page: the database cannot be read", "GET", "/api/status"},
		{"status page: search", "GET", "/api/search?q=svc"},
		{"status page: service_id", "GET", "/api/services/svc"},
		{"status page: batch list", "GET", "/api/batches"},
		{"status page: batch", "GET", "/api/batches/1"},
		{"status page: resume", "POST", "/api/halts/svc/resume"},
		{"status page: retry", "POST", "/api/batches/1/retry"},
		{"status page: cancel", "POST", "/api/batches/1/cancel"},
	}
	for _, site := range sites {
		for i := range 1000 {
			rec := httptest.NewRecorder()
			handler.ServeHTTP(rec, httptest.NewRequest(site.method, site.target, nil))
			if rec.Code != http.StatusServiceUnavailable {
				t.Fatalf("%s %s, request %d: %d %s, want 503", site.method, site.target, i, rec.Code, rec.Body)
			}
		}
	}
	bound := 2 + int(time.Since(start)/httpguard.LogIntervalDefault) // the first line, and a count per interval begun
	for _, site := range sites {
		if n := testutil.SiteLines(logs.String(), site.msg); n < 1 || n > bound {
			t.Errorf("1,000 failed %s %s wrote %d lines at %q, want 1 to %d", site.method, site.target, n, site.msg, bound)
		}
	}
}
