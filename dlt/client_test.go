package dlt_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/dlt"
	"github.com/batchclaim/batchclaim/dlt/dltsim"
)

// forEachFlavor runs test as a parallel subtest per flavour.
func forEachFlavor(t *testing.T, test func(t *testing.T, flavor dlt.Flavor)) {
	t.Helper()
	for _, f := range flavors {
		t.Run(string(f), func(t *testing.T) {
			t.Parallel()
			test(t, f)
		})
	}
}

func TestPostAccepted(t *testing.T) {
	t.Parallel()
	forEachFlavor(t, func(t *testing.T, flavor dlt.Flavor) {
		b := setup(t, flavor, options{})
		id, list := dlt.FakeBatch("svc", 1)
		res := post(t, b.client, list)
		if res.Verdict != batchclaim.Accepted || res.HTTPStatus != http.StatusAccepted {
			t.Fatalf("result = %+v, want accepted 202", res)
		}
		want := b.url + "/batch_statuses?id=" + id
		if flavor == dlt.FlavorScabbard {
			want = b.url + "/scabbard/circuit0/service0/batch_statuses?ids=" + id
		}
		if res.Link != want {
			t.Fatalf("link = %s, want %s", res.Link, want)
		}
		resp, err := http.Get(res.Link)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET link: %s", resp.Status)
		}
		waitStatus(t, b.client, id, batchclaim.StatusCommitted)
		wantEffects(t, b.sim, id, dltsim.EffectAccepted)
	})
}

func TestPostLocalErrors(t *testing.T) {
	t.Parallel()
	forEachFlavor(t, func(t *testing.T, flavor dlt.Flavor) {
		b := setup(t, flavor, options{})
		if _, err := b.client.Post(t.Context(), nil); !errors.Is(err, dlt.ErrEmptyBatchList) {
			t.Fatalf("empty: err = %v", err)
		}
		if _, err := b.client.Post(t.Context(), []byte{0xff}); !errors.Is(err, dlt.ErrBadBatchList) {
			t.Fatalf("garbage: err = %v", err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		_, list := dlt.FakeBatch("svc", 1)
		if _, err := b.client.Post(ctx, list); !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled: err = %v", err)
		}
		if len(b.sim.Posts()) != 0 {
			t.Fatalf("the simulator saw %d posts", len(b.sim.Posts()))
		}
	})
}

func TestPostInjectedStatuses(t *testing.T) {
	t.Parallel()
	// The verdict differs per flavor for 503: only Sawtooth's code 15 proves the batches were
	// not passed on; scabbard's bare 503 proves nothing.
	both := func(v batchclaim.Verdict) map[dlt.Flavor]batchclaim.Verdict {
		return map[dlt.Flavor]batchclaim.Verdict{dlt.FlavorSawtooth: v, dlt.FlavorScabbard: v}
	}
	tests := []struct {
		code       int
		verdict    map[dlt.Flavor]batchclaim.Verdict
		retryAfter time.Duration
		detail     map[dlt.Flavor]string
	}{
		{400, both(batchclaim.Rejected), 0, map[dlt.Flavor]string{
			dlt.FlavorSawtooth: "code 30: Submitted Batches Invalid", dlt.FlavorScabbard: "Bad Request"}},
		{408, both(batchclaim.Unknown), 0, map[dlt.Flavor]string{
			dlt.FlavorSawtooth: "code 19: Submission Timeout", dlt.FlavorScabbard: "Request Timeout"}},
		{500, both(batchclaim.Unknown), 0, map[dlt.Flavor]string{
			dlt.FlavorSawtooth: "code 10: Unknown Validator Error", dlt.FlavorScabbard: "The server encountered an error"}},
		{503, map[dlt.Flavor]batchclaim.Verdict{dlt.FlavorSawtooth: batchclaim.Retry, dlt.FlavorScabbard: batchclaim.Unknown},
			3 * time.Second, map[dlt.Flavor]string{
				dlt.FlavorSawtooth: "code 15: Validator Not Ready", dlt.FlavorScabbard: "Service Unavailable"}},
	}
	forEachFlavor(t, func(t *testing.T, flavor dlt.Flavor) {
		b := setup(t, flavor, options{sim: dltsim.Config{RetryAfter: 2500 * time.Millisecond}})
		for _, tt := range tests {
			b.sim.InjectStatus(tt.code, 1)
			id, list := dlt.FakeBatch("svc", tt.code)
			res := post(t, b.client, list)
			if res.Verdict != tt.verdict[flavor] || res.HTTPStatus != tt.code ||
				res.RetryAfter != tt.retryAfter || !strings.Contains(res.Detail, tt.detail[flavor]) {
				t.Errorf("%d: result = %+v, want %v retry-after=%v detail %q",
					tt.code, res, tt.verdict[flavor], tt.retryAfter, tt.detail[flavor])
			}
			if st := b.sim.Status(id); st != batchclaim.StatusUnknown {
				t.Errorf("%d: batch status %s, want UNKNOWN (not accepted)", tt.code, st)
			}
			wantEffects(t, b.sim, id, dltsim.EffectRejected)
		}
		id, list := dlt.FakeBatch("svc", 0)
		if res := post(t, b.client, list); res.Verdict != batchclaim.Accepted {
			t.Fatalf("after the injections: %+v", res)
		}
		wantEffects(t, b.sim, id, dltsim.EffectAccepted)
	})
}

func TestPostQueueFullHysteresis(t *testing.T) {
	t.Parallel()
	forEachFlavor(t, func(t *testing.T, flavor dlt.Flavor) {
		b := setup(t, flavor, options{sim: dltsim.Config{QueueHigh: 3, QueueLow: 2, RetryAfter: time.Second}})
		b.sim.SetPaused(true)
		n := 0
		postNext := func() dlt.PostResult {
			n++
			_, list := dlt.FakeBatch("svc", n)
			return post(t, b.client, list)
		}
		for range 3 {
			if res := postNext(); res.Verdict != batchclaim.Accepted {
				t.Fatalf("filling: %+v", res)
			}
		}
		res := postNext()
		if res.Verdict != batchclaim.Retry || res.HTTPStatus != http.StatusTooManyRequests ||
			res.RetryAfter != time.Second {
			t.Fatalf("full: %+v, want retry 429 with Retry-After 1s", res)
		}
		if flavor == dlt.FlavorScabbard && res.Detail != "Too Many Requests" {
			t.Fatalf("scabbard 429 detail = %q, want the status text of an empty body", res.Detail)
		}
		b.sim.CommitNext(1) // 2 queued: not below QueueLow
		if res := postNext(); res.Verdict != batchclaim.Retry {
			t.Fatalf("at QueueLow: %+v, want retry", res)
		}
		b.sim.CommitNext(1) // 1 queued
		if res := postNext(); res.Verdict != batchclaim.Accepted {
			t.Fatalf("below QueueLow: %+v, want accepted", res)
		}
	})
}

func TestPostTimeout(t *testing.T) {
	t.Parallel()
	forEachFlavor(t, func(t *testing.T, flavor dlt.Flavor) {
		b := setup(t, flavor, options{client: dlt.Config{RequestTimeout: 200 * time.Millisecond}})
		b.sim.InjectTimeouts(1, time.Hour)
		id, list := dlt.FakeBatch("svc", 1)
		res := post(t, b.client, list)
		if res.Verdict != batchclaim.Unknown || res.HTTPStatus != 0 || res.Detail == "" {
			t.Fatalf("result = %+v, want unknown, no status", res)
		}
		wantEffects(t, b.sim, id, dltsim.EffectTimeout)
		if st := b.sim.Status(id); st != batchclaim.StatusUnknown {
			t.Fatalf("status %s, want UNKNOWN", st)
		}
		if res := post(t, b.client, list); res.Verdict != batchclaim.Accepted {
			t.Fatalf("re-post: %+v", res)
		}
		wantEffects(t, b.sim, id, dltsim.EffectTimeout, dltsim.EffectAccepted)
	})
}

func TestPostDroppedResponse(t *testing.T) {
	t.Parallel()
	forEachFlavor(t, func(t *testing.T, flavor dlt.Flavor) {
		b := setup(t, flavor, options{})
		b.sim.InjectDroppedResponses(1)
		id, list := dlt.FakeBatch("svc", 1)
		res := post(t, b.client, list)
		if res.Verdict != batchclaim.Unknown || res.HTTPStatus != 0 {
			t.Fatalf("result = %+v, want unknown, no status", res)
		}
		waitStatus(t, b.client, id, batchclaim.StatusCommitted)
		if res := post(t, b.client, list); res.Verdict != batchclaim.Accepted {
			t.Fatalf("re-post: %+v", res)
		}
		wantEffects(t, b.sim, id, dltsim.EffectDropped, dltsim.EffectDuplicate)
		if got := b.sim.Committed(); len(got) != 1 || got[0] != id {
			t.Fatalf("committed = %v, want the batch once", got)
		}
	})
}

func TestPostConnectionRefused(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String()
	ln.Close()
	forEachFlavor(t, func(t *testing.T, flavor dlt.Flavor) {
		c := newClient(t, flavor, url, dlt.Config{})
		_, list := dlt.FakeBatch("svc", 1)
		res := post(t, c, list)
		if res.Verdict != batchclaim.Retry || res.HTTPStatus != 0 || res.Detail == "" {
			t.Fatalf("result = %+v, want retry, no status", res)
		}
		if _, err := c.Statuses(t.Context(), []string{strings.Repeat("a", 128)}); err == nil {
			t.Fatal("statuses: no error")
		}
	})
}

func TestAuthorization(t *testing.T) {
	t.Parallel()
	forEachFlavor(t, func(t *testing.T, flavor dlt.Flavor) {
		b := setup(t, flavor, options{sim: dltsim.Config{Authorization: "Bearer secret"}})
		id, list := dlt.FakeBatch("svc", 1)
		res := post(t, b.client, list)
		if res.Verdict != batchclaim.Retry || res.HTTPStatus != http.StatusUnauthorized {
			t.Fatalf("without authorization: %+v, want retry 401", res)
		}
		var herr *dlt.HTTPError
		if _, err := b.client.Statuses(t.Context(), []string{id}); !errors.As(err, &herr) || herr.StatusCode != 401 {
			t.Fatalf("statuses without authorization: err = %v, want HTTPError 401", err)
		}
		c := newClient(t, flavor, b.url, dlt.Config{Authorization: "Bearer secret"})
		if res := post(t, c, list); res.Verdict != batchclaim.Accepted {
			t.Fatalf("with authorization: %+v", res)
		}
		waitStatus(t, c, id, batchclaim.StatusCommitted)
	})
}
