package dlt_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/dlt"
	"github.com/batchclaim/batchclaim/dlt/dltsim"
)

// A batch still PENDING is reported COMMITTED by one StatusesWait call that the ledger holds
// until the commit. The simulator's clock moves only after the held request has read it
// once, so the answer comes from a re-check during the wait, not from the first look.
func TestStatusesWaitSeesCommit(t *testing.T) {
	t.Parallel()
	forEachFlavor(t, func(t *testing.T, flavor dlt.Flavor) {
		var (
			mu    sync.Mutex
			waits []string // the wait parameter of every status request
		)
		arrived := make(chan struct{}, 1)
		b := setup(t, flavor, options{fakeClock: true, sim: dltsim.Config{CommitLatency: 300 * time.Millisecond},
			wrap: func(h http.Handler) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if strings.HasSuffix(r.URL.Path, "/batch_statuses") {
						mu.Lock()
						waits = append(waits, r.URL.Query().Get("wait"))
						mu.Unlock()
						if r.URL.Query().Has("wait") {
							arrived <- struct{}{}
						}
					}
					h.ServeHTTP(w, r)
				})
			}})
		id, list := dlt.FakeBatch("svc", 1)
		post(t, b.client, list)
		if st := statuses(t, b.client, id)[0]; st.Status != batchclaim.StatusPending {
			t.Fatalf("without wait: %+v, want PENDING", st)
		}

		go func() {
			select {
			case <-arrived:
			case <-t.Context().Done():
				return
			}
			// Let the held request look once, then let the latency pass.
			for n := b.clock.Reads(); b.clock.Reads() == n; {
				select {
				case <-t.Context().Done():
					return
				case <-time.After(time.Millisecond):
				}
			}
			b.clock.Add(300 * time.Millisecond)
		}()
		// The call returns as soon as the batch commits; the long wait only keeps a stalled
		// machine from ending it first.
		sts, err := b.client.StatusesWait(t.Context(), []string{id}, 30*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if len(sts) != 1 || sts[0].ID != id || sts[0].Status != batchclaim.StatusCommitted {
			t.Fatalf("with wait: %+v, want COMMITTED", sts)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(waits) != 2 || waits[0] != "" || waits[1] != "30" {
			t.Fatalf("wait parameters = %q, want none, then 30", waits)
		}
	})
}

// A wait ends on its own: a batch that does not settle is reported PENDING after it.
func TestStatusesWaitEnds(t *testing.T) {
	t.Parallel()
	forEachFlavor(t, func(t *testing.T, flavor dlt.Flavor) {
		b := setup(t, flavor, options{})
		b.sim.SetPaused(true)
		id, list := dlt.FakeBatch("svc", 1)
		post(t, b.client, list)
		sts, err := b.client.StatusesWait(t.Context(), []string{id}, 500*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		if sts[0].Status != batchclaim.StatusPending {
			t.Fatalf("status = %+v, want PENDING", sts[0])
		}
	})
}

// roundTripFunc is an http.RoundTripper.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// The wait goes on the wire in whole seconds, rounded up, and the request's deadline allows
// for it on top of the request timeout.
func TestStatusesWaitRequest(t *testing.T) {
	t.Parallel()
	const timeout = 3 * time.Second
	id := strings.Repeat("a", 128)
	tests := []struct {
		wait  time.Duration
		param string
		extra time.Duration
	}{
		{0, "", 0},
		{-time.Second, "", 0},
		{time.Nanosecond, "1", time.Second},
		{500 * time.Millisecond, "1", time.Second},
		{2 * time.Second, "2", 2 * time.Second},
		{2500 * time.Millisecond, "3", 3 * time.Second},
	}
	forEachFlavor(t, func(t *testing.T, flavor dlt.Flavor) {
		for _, tt := range tests {
			var (
				query    map[string][]string
				deadline time.Time
				hasDL    bool
			)
			hc := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
				query = r.URL.Query()
				deadline, hasDL = r.Context().Deadline()
				body := `{"data": []}`
				if flavor == dlt.FlavorScabbard {
					body = `[]`
				}
				return &http.Response{StatusCode: http.StatusOK, Header: http.Header{},
					Body: io.NopCloser(strings.NewReader(body)), Request: r}, nil
			})}
			c := newClient(t, flavor, "http://ledger.invalid:8008", dlt.Config{HTTPClient: hc, RequestTimeout: timeout})
			before := time.Now()
			var (
				sts []batchclaim.LedgerStatus
				err error
			)
			if tt.wait == 0 {
				sts, err = c.Statuses(context.Background(), []string{id})
			} else {
				sts, err = c.StatusesWait(context.Background(), []string{id}, tt.wait)
			}
			after := time.Now()
			if err != nil || len(sts) != 1 || sts[0].Status != batchclaim.StatusUnknown {
				t.Fatalf("wait %v: %+v, %v", tt.wait, sts, err)
			}
			if got, ok := query["wait"]; tt.param == "" && ok || tt.param != "" && (len(got) != 1 || got[0] != tt.param) {
				t.Errorf("wait %v: query %v, want wait=%q", tt.wait, query, tt.param)
			}
			lo, hi := before.Add(timeout+tt.extra), after.Add(timeout+tt.extra)
			if !hasDL || deadline.Before(lo) || deadline.After(hi) {
				t.Errorf("wait %v: request deadline %v after the call began, want %v", tt.wait, deadline.Sub(before), timeout+tt.extra)
			}
		}
	})
}
