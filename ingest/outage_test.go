package ingest_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batchclaim/batchclaim/dlt"
	"github.com/batchclaim/batchclaim/httpguard"
	"github.com/batchclaim/batchclaim/ingest"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
	"github.com/batchclaim/batchclaim/testkit/testutil"
)

// During a database outage every store and every status read fails; 1,000 requests to each
// write a bounded number of log lines per site (a line, then a count per interval), not one
// each, and every request is still answered 503.
func TestOutageLogsAreBounded(t *testing.T) {
	t.Parallel()
	pool, err := pgxpool.New(context.Background(), "postgres://nobody@127.0.0.1:1/none?connect_timeout=1") // nothing listens there
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	var logs testutil.SyncBuffer
	h, err := ingest.NewHandler(dbtest.Open(t, pool, ""), ingest.Config{Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	h.Register(mux)
	handler := httpguard.Guard{}.Wrap(mux)
	_, list := dlt.FakeBatch("svc-outage", 0)
	id := strings.Repeat("ab", 64)
	start := time.Now()
	for _, site := range []struct {
		msg, method, target, contentType string
		body                             []byte
	}{
		{"store batches", "POST", "/batches?service_id=svc-outage", "application/octet-stream", list},
		{"read batch statuses", "GET", "/batch_statuses?id=" + id, "", nil},
		{"read batch statuses", "POST", "/batch_statuses", "application/json", []byte(`["` + id + `"]`)},
	} {
		for i := range 1000 {
			req := httptest.NewRequest(site.method, site.target, bytes.NewReader(site.body))
			req.Header.Set("Content-Type", site.contentType)
			rec := httptest.NewRecorder()
			handler.ServeHTTP(rec, req)
			if rec.Code != http.StatusServiceUnavailable {
				t.Fatalf("%s %s, request %d: %d %s, want 503", site.method, site.target, i, rec.Code, rec.Body)
			}
		}
	}
	bound := 2 + int(time.Since(start)/httpguard.LogIntervalDefault) // the first line, and a count per interval begun
	for msg, requests := range map[string]int{"store batches": 1000, "read batch statuses": 2000} {
		if n := testutil.SiteLines(logs.String(), msg); n < 1 || n > bound {
			t.Errorf("%d requests that failed at %q wrote %d lines, want 1 to %d:\n%.2000s", requests, msg, n, bound, logs.String())
		}
	}
}
