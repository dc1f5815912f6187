package dlt_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/dlt"
	"github.com/batchclaim/batchclaim/dlt/dltsim"
)

var flavors = []dlt.Flavor{dlt.FlavorSawtooth, dlt.FlavorScabbard}

// bundle is what setup returns: a running simulator and a client of it.
type bundle struct {
	sim    *dltsim.Sim
	url    string
	client dlt.Client
	clock  *fakeClock
}

type options struct {
	sim    dltsim.Config
	client dlt.Config
	// wrap, when set, serves the simulator through an httptest server wrapping its handler.
	wrap func(http.Handler) http.Handler
	// fakeClock gives the simulator a clock that moves only by hand.
	fakeClock bool
}

func setup(t *testing.T, flavor dlt.Flavor, opts options) bundle {
	t.Helper()
	opts.sim.Flavor = flavor
	var clock *fakeClock
	if opts.fakeClock {
		clock = &fakeClock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
		opts.sim.Now = clock.Now
	}
	sim, err := dltsim.New(opts.sim)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sim.Close() })
	var url string
	if opts.wrap != nil {
		srv := httptest.NewServer(opts.wrap(sim.Handler()))
		t.Cleanup(srv.Close)
		url = srv.URL
	} else if url, err = sim.Listen(); err != nil {
		t.Fatal(err)
	}
	return bundle{sim: sim, url: url, client: newClient(t, flavor, url, opts.client), clock: clock}
}

func newClient(t *testing.T, flavor dlt.Flavor, url string, cfg dlt.Config) dlt.Client {
	t.Helper()
	cfg.Flavor, cfg.URL = flavor, url
	if flavor == dlt.FlavorScabbard {
		cfg.Circuit, cfg.Service = dltsim.CircuitDefault, dltsim.ServiceDefault
	}
	c, err := dlt.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

type fakeClock struct {
	mu    sync.Mutex
	t     time.Time
	reads int // calls of Now so far
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reads++
	return c.t
}

// Reads returns how often Now was called.
func (c *fakeClock) Reads() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reads
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// post posts a list and fails the test on an error.
func post(t *testing.T, c dlt.Client, list []byte) dlt.PostResult {
	t.Helper()
	res, err := c.Post(t.Context(), list)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// statuses asks for ids and fails the test on an error.
func statuses(t *testing.T, c dlt.Client, ids ...string) []batchclaim.LedgerStatus {
	t.Helper()
	sts, err := c.Statuses(t.Context(), ids)
	if err != nil {
		t.Fatal(err)
	}
	if len(sts) != len(ids) {
		t.Fatalf("got %d statuses for %d ids", len(sts), len(ids))
	}
	return sts
}

// waitStatus polls until id has status want, failing after a deadline.
func waitStatus(t *testing.T, c dlt.Client, id string, want batchclaim.Status) batchclaim.LedgerStatus {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for {
		sts, err := c.Statuses(ctx, []string{id})
		if err == nil && sts[0].Status == want {
			return sts[0]
		}
		select {
		case <-ctx.Done():
			t.Fatalf("batch %s: last status %v, err %v; want %s", id[:8], sts, err, want)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// effects returns the effects the simulator recorded for id, in order.
func effects(sim *dltsim.Sim, id string) []string {
	var out []string
	for _, p := range sim.Posts() {
		if p.BatchID == id {
			out = append(out, p.Effect)
		}
	}
	return out
}

func wantEffects(t *testing.T, sim *dltsim.Sim, id string, want ...string) {
	t.Helper()
	if got := effects(sim, id); !slices.Equal(got, want) {
		t.Fatalf("effects of %s = %v, want %v", id[:8], got, want)
	}
}
