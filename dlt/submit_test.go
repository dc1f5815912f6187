package dlt_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/dlt"
	"github.com/batchclaim/batchclaim/dlt/dltsim"
	"github.com/batchclaim/batchclaim/observer"
	"github.com/batchclaim/batchclaim/submitter"
)

// A Client is the submitter's Submitter and the observer's StatusWaiter as it is.
var (
	_ submitter.Submitter   = dlt.Client(nil)
	_ observer.StatusWaiter = dlt.Client(nil)
)

// A batch submitted through a Client used as a submitter.Submitter, still PENDING under a
// commit latency, is reported COMMITTED by one StatusesWait call of the Client used as an
// observer.StatusWaiter, in both flavours; Statuses without a wait reports it PENDING.
func TestClientAsSubmitterAndStatusWaiter(t *testing.T) {
	t.Parallel()
	for _, flavor := range []dlt.Flavor{dlt.FlavorSawtooth, dlt.FlavorScabbard} {
		t.Run(string(flavor), func(t *testing.T) {
			t.Parallel()
			clock := &fakeClock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
			sim, err := dltsim.New(dltsim.Config{Flavor: flavor, CommitLatency: 300 * time.Millisecond, Now: clock.Now})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = sim.Close() })
			arrived := make(chan struct{}, 1)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if strings.HasSuffix(r.URL.Path, "/batch_statuses") && r.URL.Query().Get("wait") != "" {
					arrived <- struct{}{}
				}
				sim.Handler().ServeHTTP(w, r)
			}))
			t.Cleanup(srv.Close)
			client, err := dlt.NewClient(dlt.Config{Flavor: flavor, URL: srv.URL,
				Circuit: dltsim.CircuitDefault, Service: dltsim.ServiceDefault})
			if err != nil {
				t.Fatal(err)
			}
			id, list := dlt.FakeBatch("svc", 1)
			var sub submitter.Submitter = client
			res, err := sub.Submit(t.Context(), batchclaim.Batch{Payload: list})
			if err != nil || res.Verdict != batchclaim.Accepted {
				t.Fatalf("submit: %+v, %v", res, err)
			}

			var ws observer.StatusWaiter = client
			sts, err := ws.Statuses(t.Context(), []string{id})
			if err != nil || len(sts) != 1 || sts[0].Status != batchclaim.StatusPending {
				t.Fatalf("without wait: %+v, %v; want PENDING", sts, err)
			}
			go func() {
				select {
				case <-arrived:
				case <-t.Context().Done():
					return
				}
				// Let the held request look once, then let the latency pass.
				for n := clock.Reads(); clock.Reads() == n; {
					select {
					case <-t.Context().Done():
						return
					case <-time.After(time.Millisecond):
					}
				}
				clock.Add(300 * time.Millisecond)
			}()
			// The answer comes once the batch commits; the long wait only keeps a stalled
			// machine from ending it first.
			sts, err = ws.StatusesWait(t.Context(), []string{id}, 30*time.Second)
			if err != nil || len(sts) != 1 || sts[0].ID != id || sts[0].Status != batchclaim.StatusCommitted {
				t.Fatalf("with wait: %+v, %v; want COMMITTED", sts, err)
			}
		})
	}
}
