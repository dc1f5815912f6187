package ingest_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batchclaim/batchclaim/dlt"
	"github.com/batchclaim/batchclaim/ingest"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
	"github.com/batchclaim/batchclaim/testkit/tcpproxy"
)

// apiBehindProxy serves the ingest API on the database at dbURL through a proxy the test can
// freeze, with one connection slot, a store timeout of 500 ms and waits long enough never to
// be what ends a request.
func apiBehindProxy(t *testing.T, dbURL string) (*tcpproxy.Proxy, *httptest.Server) {
	t.Helper()
	proxy, viaProxy := dbtest.Proxied(t, dbURL)
	pool, err := pgxpool.New(t.Context(), viaProxy)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	h, err := ingest.NewHandler(dbtest.Open(t, pool, ""), ingest.Config{MaxConns: 1, StoreTimeout: 500 * time.Millisecond, MaxWait: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	h.Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return proxy, srv
}

// A database that stops answering while a request stores its batches costs the API its
// connection for StoreTimeout at most: the request is answered 503 with nothing stored, and
// the next one, on the API's only connection slot, is stored once the link is back.
func TestStoreTimeoutFreesTheConnection(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDB(t)
	proxy, srv := apiBehindProxy(t, dbURL)
	direct, err := pgxpool.New(t.Context(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(direct.Close)
	postBatch := func(i int) int {
		_, list := dlt.FakeBatch("svc", i)
		code, _ := post(t, srv.URL+"/batches?service_id=svc", "application/octet-stream", list)
		return code
	}

	if code := postBatch(0); code != http.StatusAccepted {
		t.Fatalf("first batch: %d", code)
	}
	proxy.Freeze()
	if code := postBatch(1); code != http.StatusServiceUnavailable {
		t.Fatalf("a batch stored over a frozen link: %d, want 503 once the store timeout passed", code)
	}
	proxy.Restore()
	if code := postBatch(2); code != http.StatusAccepted {
		t.Fatalf("the next batch after the link came back: %d, want 202 (the timed-out store gave its connection slot back)", code)
	}
	if n := count(t, direct, "batches"); n != 2 {
		t.Fatalf("%d batches stored, want 2: the timed-out request stored nothing", n)
	}
}

// A status read on a link that stopped answering holds the API's connection for StoreTimeout
// at most, as a store does: it is answered 503, and a store waiting for the only connection
// slot goes ahead once the link is back.
func TestStatusReadTimeoutFreesTheConnection(t *testing.T) {
	t.Parallel()
	proxy, srv := apiBehindProxy(t, dbtest.NewDB(t))
	id, list := dlt.FakeBatch("svc", 0)
	if code, _ := post(t, srv.URL+"/batches?service_id=svc", "application/octet-stream", list); code != http.StatusAccepted {
		t.Fatalf("first batch: %d", code)
	}

	proxy.Freeze()
	// The client waits far longer than the timeout: without it, the read would hold the
	// connection until then, and the request would fail here instead of being answered.
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/batch_statuses?id="+id, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("status read over a frozen link: %v; want a 503 once the store timeout passed", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("status read over a frozen link: %d, want 503", resp.StatusCode)
	}
	proxy.Restore()
	_, next := dlt.FakeBatch("svc", 1)
	if code, _ := post(t, srv.URL+"/batches?service_id=svc", "application/octet-stream", next); code != http.StatusAccepted {
		t.Fatalf("a batch after the link came back: %d, want 202 (the timed-out read gave its connection slot back)", code)
	}
}
