package node_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batchclaim/batchclaim/claims"
	"github.com/batchclaim/batchclaim/dlt"
	"github.com/batchclaim/batchclaim/dlt/dltsim"
	"github.com/batchclaim/batchclaim/ingest"
	"github.com/batchclaim/batchclaim/observer"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
)

// Through the Sawtooth adapter, one poll of 40 accepted batches of 40 service_ids sends
// three GET /batch_statuses of at most 15 ids each, not 40 of one.
func TestPollPacksStatusGETsAcrossServiceIDs(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := newPool(t, dbtest.NewDB(t))
	sim, err := dltsim.New(dltsim.Config{Flavor: dlt.FlavorSawtooth})
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu   sync.Mutex
		gets [][]string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/batch_statuses") {
			mu.Lock()
			gets = append(gets, strings.Split(r.URL.Query().Get("id"), ","))
			mu.Unlock()
		}
		sim.Handler().ServeHTTP(w, r)
	}))
	defer srv.Close()
	client, err := dlt.NewClient(dlt.Config{Flavor: dlt.FlavorSawtooth, URL: srv.URL, RequestTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	const services = 40
	for i := range services {
		svc := fmt.Sprintf("svc-%03d", i)
		id, list := dlt.FakeBatch(svc, 0)
		s, err := ingest.Enqueue(ctx, pool, svc, id, list)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := pool.Exec(ctx, `UPDATE batchclaim.batches SET state = 'PENDING' WHERE seq = $1`, s.Seq); err != nil {
			t.Fatal(err)
		}
	}
	eng, err := claims.New(dbtest.Open(t, pool, ""), claims.Config{Name: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Register(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `UPDATE batchclaim.service_id_claims SET claimant = $1, epoch = 1`, eng.InstanceID()); err != nil {
		t.Fatal(err)
	}
	if _, err := eng.Cycle(ctx); err != nil {
		t.Fatal(err)
	}
	rec, err := observer.NewRecorder(dbtest.Open(t, pool, ""), eng, observer.RecorderConfig{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := observer.NewPoller(dbtest.Open(t, pool, ""), eng, rec, client, observer.PollerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := p.PollOnce(ctx); err != nil || n != services {
		t.Fatalf("PollOnce asked about %d batches (err %v), want %d", n, err, services)
	}
	mu.Lock()
	defer mu.Unlock()
	asked := 0
	for _, g := range gets {
		if len(g) > dlt.SawtoothMaxStatusIDs {
			t.Errorf("a GET asked about %d ids, more than %d", len(g), dlt.SawtoothMaxStatusIDs)
		}
		asked += len(g)
	}
	if len(gets) != 3 || asked != services {
		t.Fatalf("%d GETs asking about %d ids, want 3 GETs asking about %d", len(gets), asked, services)
	}
}
