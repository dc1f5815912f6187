package dltsim_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/batchclaim/batchclaim/dlt"
	"github.com/batchclaim/batchclaim/dlt/dltsim"
)

type bundle struct {
	sim   *dltsim.Sim
	url   string
	clock *fakeClock
}

// setup starts a simulator on a loopback port with a clock that moves only by hand.
func setup(t *testing.T, cfg dltsim.Config) bundle {
	t.Helper()
	clock := &fakeClock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	if cfg.Now == nil {
		cfg.Now = clock.Now
	}
	sim, err := dltsim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sim.Close() })
	url, err := sim.Listen()
	if err != nil {
		t.Fatal(err)
	}
	return bundle{sim: sim, url: url, clock: clock}
}

// batchesPath is where b accepts POSTs.
func (b bundle) batchesPath() string {
	if b.sim.Flavor() == dlt.FlavorScabbard {
		return "/scabbard/circuit0/service0/batches"
	}
	return "/batches"
}

func (b bundle) statusesPath() string {
	if b.sim.Flavor() == dlt.FlavorScabbard {
		return "/scabbard/circuit0/service0/batch_statuses?ids="
	}
	return "/batch_statuses?id="
}

type answer struct {
	status int
	header http.Header
	body   []byte
}

// do sends a request and returns the answer.
func do(t *testing.T, method, url string, body []byte, header map[string]string) answer {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: b}
}

// get is a GET usable from any goroutine; a failure gives status 0 and the error as body.
func get(url string) answer {
	resp, err := http.Get(url)
	if err != nil {
		return answer{body: []byte(err.Error())}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return answer{body: []byte(err.Error())}
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: b}
}

var octet = map[string]string{"Content-Type": "application/octet-stream"}

// postList posts a BatchList with the right content type.
func (b bundle) postList(t *testing.T, list []byte) answer {
	t.Helper()
	return do(t, http.MethodPost, b.url+b.batchesPath(), list, octet)
}

// postFake posts FakeBatch(svc, n), wants 202 and returns the id.
func (b bundle) postFake(t *testing.T, svc string, n int) string {
	t.Helper()
	id, list := dlt.FakeBatch(svc, n)
	if a := b.postList(t, list); a.status != http.StatusAccepted {
		t.Fatalf("post %s/%d: %d %s", svc, n, a.status, a.body)
	}
	return id
}

func decode[T any](t *testing.T, a answer) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(a.body, &v); err != nil {
		t.Fatalf("decode %q: %v", a.body, err)
	}
	return v
}

type sawtoothError struct {
	Error struct {
		Code    int    `json:"code"`
		Title   string `json:"title"`
		Message string `json:"message"`
	} `json:"error"`
}

type scabbardError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func effectsOf(sim *dltsim.Sim) []string {
	var out []string
	for _, p := range sim.Posts() {
		out = append(out, p.Effect)
	}
	return out
}
