package dltsim_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/batchclaim/batchclaim/dlt"
	"github.com/batchclaim/batchclaim/dlt/dltsim"
)

// A 503 can carry the code that says the outcome is unknown (17), set at run time through the
// admin API, and clear=true cancels what is left.
func TestInjectErrorCodeAndClear(t *testing.T) {
	t.Parallel()
	b := setup(t, dltsim.Config{})
	admin := func(path string) {
		t.Helper()
		if a := do(t, http.MethodPost, b.url+"/_sim/"+path, nil, nil); a.status != 204 {
			t.Fatalf("POST /_sim/%s: %d %s", path, a.status, a.body)
		}
	}
	_, list := dlt.FakeBatch("svc", 1)
	admin("inject?status=503&code=17&n=5")
	a := b.postList(t, list)
	if a.status != 503 || !strings.Contains(string(a.body), `"code":17`) || !strings.Contains(string(a.body), "Timed Out") {
		t.Fatalf("injected 503 code 17: %d %s", a.status, a.body)
	}
	// Code 17 says the outcome is unknown: the batch was in fact accepted.
	if posts := b.sim.Posts(); posts[0].Effect != dltsim.EffectAcceptedError || len(b.sim.Committed()) != 1 {
		t.Fatalf("503 code 17: effect %q, committed %v; want accepted-error and the batch committed", posts[0].Effect, b.sim.Committed())
	}
	_, list2 := dlt.FakeBatch("svc", 2)
	admin("inject?status=503&n=1") // a plain 503 keeps the usual code, and is not accepted
	if a := b.postList(t, list2); a.status != 503 || !strings.Contains(string(a.body), `"code":15`) || len(b.sim.Committed()) != 1 {
		t.Fatalf("injected 503: %d %s, committed %v", a.status, a.body, b.sim.Committed())
	}
	admin("inject?status=429&n=5")
	admin("inject?clear=true")
	if a := b.postList(t, list); a.status != 202 {
		t.Fatalf("after clear: %d %s", a.status, a.body)
	}
}

// Settled lists every settlement in order with its place among the POSTs, so a history can
// tell which batches were still outstanding when a POST arrived.
func TestSettled(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_700_000_000, 0)
	b := setup(t, dltsim.Config{CommitLatency: time.Second, InvalidRate: 0, Now: func() time.Time { return now }})
	id1 := b.postFake(t, "svc", 1)
	id2 := b.postFake(t, "svc", 2)
	if got := b.sim.Settled(); len(got) != 0 {
		t.Fatalf("settled before the latency passed: %+v", got)
	}
	now = now.Add(2 * time.Second)
	id3 := b.postFake(t, "svc", 3) // settles 1 and 2 before it is recorded
	got := b.sim.Settled()
	if len(got) != 2 || got[0].BatchID != id1 || got[1].BatchID != id2 || got[0].AfterPosts != 2 ||
		got[0].Status != "COMMITTED" || got[0].Service != "svc" || !got[0].At.Equal(now) {
		t.Fatalf("settled = %+v", got)
	}
	b.postFake(t, "svc", 1) // a duplicate of a committed batch settles nothing
	now = now.Add(2 * time.Second)
	got = decode[[]dltsim.Settlement](t, do(t, http.MethodGet, b.url+"/_sim/settled", nil, nil))
	if len(got) != 3 || got[2].BatchID != id3 || got[2].AfterPosts != 4 {
		t.Fatalf("settled = %+v", got)
	}
}
