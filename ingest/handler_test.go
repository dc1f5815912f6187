package ingest_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batchclaim/batchclaim/dlt"
	"github.com/batchclaim/batchclaim/httpguard"
	"github.com/batchclaim/batchclaim/ingest"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
)

func setup(t *testing.T) (*httptest.Server, *pgxpool.Pool) {
	t.Helper()
	return setupWith(t, ingest.Config{MaxBody: 4096})
}

// setupWith serves the API with cfg behind a listener guard for the server's loopback
// address, as an instance does.
func setupWith(t *testing.T, cfg ingest.Config) (*httptest.Server, *pgxpool.Pool) {
	t.Helper()
	srv, pool, _ := setupHandler(t, cfg)
	return srv, pool
}

// setupHandler is setupWith that also returns the handler, for tests that read its Stats.
func setupHandler(t *testing.T, cfg ingest.Config) (*httptest.Server, *pgxpool.Pool, *ingest.Handler) {
	t.Helper()
	pool := dbtest.NewPool(t)
	mux := http.NewServeMux()
	h, err := ingest.NewHandler(dbtest.Open(t, pool, ""), cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.Register(mux)
	srv := httptest.NewUnstartedServer(nil)
	hosts, err := httpguard.NewHosts(srv.Listener.Addr().String(), nil)
	if err != nil {
		t.Fatal(err)
	}
	srv.Config.Handler = httpguard.Guard{Hosts: hosts}.Wrap(mux)
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, pool, h
}

func post(t *testing.T, url, contentType string, body []byte) (int, map[string]any) {
	t.Helper()
	resp, err := http.Post(url, contentType, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("status %d, body not JSON: %q", resp.StatusCode, raw)
	}
	return resp.StatusCode, out
}

func count(t *testing.T, pool *pgxpool.Pool, table string) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(t.Context(), "SELECT count(*) FROM batchclaim."+table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestPostBatchesIsIdempotent(t *testing.T) {
	t.Parallel()
	srv, pool := setup(t)
	id1, l1 := dlt.FakeBatch("svc", 1)
	id2, l2 := dlt.FakeBatch("svc", 2)
	list := append(append([]byte{}, l1...), l2...) // concatenated BatchLists are one BatchList
	for range 2 {
		code, out := post(t, srv.URL+"/batches?service_id=svc", "application/octet-stream", list)
		if code != http.StatusAccepted {
			t.Fatalf("status %d: %v", code, out)
		}
		link, _ := out["link"].(string)
		if !strings.HasPrefix(link, srv.URL+"/batch_statuses?id=") || !strings.Contains(link, id1+","+id2) {
			t.Fatalf("link %q", link)
		}
	}
	if n := count(t, pool, "batches"); n != 2 {
		t.Fatalf("%d batches stored after posting the same two twice, want 2", n)
	}
	var seqs []int64
	rows, _ := pool.Query(t.Context(), `SELECT seq FROM batchclaim.batches ORDER BY batch_id = $1 DESC`, id1)
	for rows.Next() {
		var s int64
		_ = rows.Scan(&s)
		seqs = append(seqs, s)
	}
	if len(seqs) != 2 || seqs[0] >= seqs[1] {
		t.Fatalf("seqs %v: the list order is not kept", seqs)
	}
	if n := count(t, pool, "service_id_claims"); n != 1 {
		t.Fatalf("%d claim rows, want the service_id registered once", n)
	}

	// The status link answers in the Sawtooth shape.
	resp, err := http.Get(srv.URL + "/batch_statuses?id=" + id1 + "," + strings.Repeat("a", 128))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st struct {
		Data []struct {
			ID                  string `json:"id"`
			Status              string `json:"status"`
			InvalidTransactions []any  `json:"invalid_transactions"`
		} `json:"data"`
		Link string `json:"link"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	if len(st.Data) != 2 || st.Data[0].Status != "PENDING" || st.Data[1].Status != "UNKNOWN" || st.Data[0].InvalidTransactions == nil || st.Link == "" {
		t.Fatalf("statuses %+v", st)
	}
}

func TestBadInputStoresNothing(t *testing.T) {
	t.Parallel()
	_, good := dlt.FakeBatch("svc", 1)
	tests := []struct {
		name, query, contentType string
		body                     []byte
		wantStatus, wantCode     int
	}{
		{"wrong content type", "service_id=svc", "application/json", good, 400, 42},
		{"empty body", "service_id=svc", "application/octet-stream", nil, 400, 34},
		{"garbage", "service_id=svc", "application/octet-stream", []byte("\xff\xff\xffnot protobuf"), 400, 35},
		{"oversized", "service_id=svc", "application/octet-stream", bytes.Repeat([]byte{1}, 5000), 413, 36},
		{"missing service_id", "", "application/octet-stream", good, 400, 70},
		{"blank service_id", "service_id=", "application/octet-stream", good, 400, 70},
		{"service_id with a space", "service_id=a%20b", "application/octet-stream", good, 400, 70},
		{"service_id not UTF-8", "service_id=%FF%FE", "application/octet-stream", good, 400, 70},
		{"service_id with NUL", "service_id=svc%00", "application/octet-stream", good, 400, 70},
		{"service_id with a C1 control", "service_id=svc%C2%9B31m", "application/octet-stream", good, 400, 70},
		{"service_id with a bidi override", "service_id=svc%E2%80%AEgpj", "application/octet-stream", good, 400, 70},
		{"service_id with a zero-width space", "service_id=svc%E2%80%8B", "application/octet-stream", good, 400, 70},
		{"service_id with a Hangul filler", "service_id=svc%E3%85%A4", "application/octet-stream", good, 400, 70},
		{"service_id with a variation selector", "service_id=svc%EF%B8%8F", "application/octet-stream", good, 400, 70},
		{"service_id not in NFC", "service_id=a%CC%81", "application/octet-stream", good, 400, 70},
		{"oversized, announced", "service_id=svc", "application/octet-stream", bytes.Repeat([]byte{1}, 1<<20), 413, 36},
		{"unknown parameter", "service_id=svc&servce=x", "application/octet-stream", good, 400, 71},
		{"service_id given twice", "service_id=svc&service_id=other", "application/octet-stream", good, 400, 73},
		{"service_id given twice, the same", "service_id=svc&service_id=svc", "application/octet-stream", good, 400, 73},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv, pool := setup(t)
			code, out := post(t, srv.URL+"/batches?"+tt.query, tt.contentType, tt.body)
			if code != tt.wantStatus {
				t.Fatalf("status %d, want %d (%v)", code, tt.wantStatus, out)
			}
			e, _ := out["error"].(map[string]any)
			if got, _ := e["code"].(float64); int(got) != tt.wantCode {
				t.Fatalf("error %v, want code %d", out, tt.wantCode)
			}
			if n := count(t, pool, "batches") + count(t, pool, "service_id_claims"); n != 0 {
				t.Fatalf("%d rows stored for a bad request", n)
			}
		})
	}
}

func TestStatusQueryErrors(t *testing.T) {
	t.Parallel()
	srv, _ := setup(t)
	for _, tt := range []struct {
		query    string
		wantCode int
	}{{"", 66}, {"id=abc", 60}, {"id=" + strings.Repeat("A", 128), 60}, {"ids=x", 71}, {"id=" + strings.Repeat("a", 128) + "&id=" + strings.Repeat("b", 128), 73}} {
		resp, err := http.Get(srv.URL + "/batch_statuses?" + tt.query)
		if err != nil {
			t.Fatal(err)
		}
		var out struct {
			Error struct{ Code int } `json:"error"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&out)
		resp.Body.Close()
		if resp.StatusCode != 400 || out.Error.Code != tt.wantCode {
			t.Errorf("?%s: status %d code %d, want 400 code %d", tt.query, resp.StatusCode, out.Error.Code, tt.wantCode)
		}
	}
}
