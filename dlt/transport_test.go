package dlt_test

import (
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/dlt"
	"github.com/batchclaim/batchclaim/dlt/dltsim"
)

// A burst of concurrent POSTs leaves its connections open for the next burst: the default
// client does not dial again for each (net/http's default transport keeps 2 per host). With
// fewer idle connections kept (Config.IdleConns) than the burst, the next one dials again.
func TestDefaultClientKeepsABurstsConnections(t *testing.T) {
	t.Parallel()
	const burst = 64
	if got := twoBursts(t, burst, 0); got > burst+burst/8 {
		t.Errorf("two bursts of %d concurrent POSTs opened %d connections, want about %d: the first burst's were not kept", burst, got, burst)
	}
	if got := twoBursts(t, burst, 8); got < burst+burst/2 {
		t.Errorf("two bursts of %d concurrent POSTs, 8 idle connections kept: %d connections, want about %d", burst, got, 2*burst-8)
	}
}

// twoBursts sends two bursts of concurrent POSTs through a default client that keeps
// idleConns idle connections (0: the default) and returns the connections they opened.
func twoBursts(t *testing.T, burst, idleConns int) int64 {
	t.Helper()
	sim, err := dltsim.New(dltsim.Config{Flavor: dlt.FlavorSawtooth})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sim.Close() })
	var dials atomic.Int64
	var arrived sync.WaitGroup
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived.Done()
		arrived.Wait() // every POST of the burst is open at once: one connection each
		sim.Handler().ServeHTTP(w, r)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			dials.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	client, err := dlt.NewClient(dlt.Config{Flavor: dlt.FlavorSawtooth, URL: srv.URL, IdleConns: idleConns})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for round := range 2 {
		arrived.Add(burst)
		var done sync.WaitGroup
		for range burst {
			_, list := dlt.FakeBatch("svc", n)
			n++
			done.Add(1)
			go func() {
				defer done.Done()
				if res, err := client.Post(t.Context(), list); err != nil || res.Verdict != batchclaim.Accepted {
					t.Errorf("round %d: %+v, %v", round, res, err)
				}
			}()
		}
		done.Wait()
		// A connection goes back to the idle pool from the transport's own read loop, just
		// after its response was read: give the burst's a moment to get there (a loaded
		// machine's scheduler included; the transport exposes no count to wait for).
		time.Sleep(500 * time.Millisecond)
	}
	return dials.Load()
}
