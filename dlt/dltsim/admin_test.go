package dltsim_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/dlt"
	"github.com/batchclaim/batchclaim/dlt/dltsim"
)

func TestAdminAPI(t *testing.T) {
	t.Parallel()
	b := setup(t, dltsim.Config{})
	admin := func(path string, want int) answer {
		t.Helper()
		a := do(t, http.MethodPost, b.url+"/_sim/"+path, nil, nil)
		if a.status != want {
			t.Fatalf("POST /_sim/%s: %d %s, want %d", path, a.status, a.body, want)
		}
		return a
	}
	_, list := dlt.FakeBatch("svc", 1)

	admin("inject?status=503&n=2", 204)
	for range 2 {
		if a := b.postList(t, list); a.status != 503 {
			t.Fatalf("injected 503: %d", a.status)
		}
	}
	admin("inject?status=500", 204) // n defaults to 1
	if a := b.postList(t, list); a.status != 500 {
		t.Fatalf("injected 500: %d", a.status)
	}

	admin("inject?drop=1", 204)
	if resp, err := http.Post(b.url+"/batches", "application/octet-stream", strings.NewReader(string(list))); err == nil {
		resp.Body.Close()
		t.Fatalf("dropped: got %s", resp.Status)
	}

	admin("inject?timeout=1ms&n=1", 204)
	_, list2 := dlt.FakeBatch("svc", 2)
	if resp, err := http.Post(b.url+"/batches", "application/octet-stream", strings.NewReader(string(list2))); err == nil {
		resp.Body.Close()
		t.Fatalf("timeout: got %s", resp.Status)
	}

	admin("pause?on=true", 204)
	id3 := b.postFake(t, "svc", 3)
	if st := b.sim.Status(id3); st != batchclaim.StatusPending {
		t.Fatalf("paused: %s", st)
	}
	if a := admin("commit?n=1", 200); strings.TrimSpace(string(a.body)) != `{"committed":1}` {
		t.Fatalf("commit: %s", a.body)
	}
	id4 := b.postFake(t, "svc", 4)
	admin("restart", 204)
	admin("pause?on=false", 204)
	if st := b.sim.Status(id4); st != batchclaim.StatusUnknown {
		t.Fatalf("after restart: %s", st)
	}

	id1, _ := dlt.FakeBatch("svc", 1)
	committed := decode[[]string](t, do(t, http.MethodGet, b.url+"/_sim/committed", nil, nil))
	if !slices.Equal(committed, []string{id1, id3}) {
		t.Fatalf("committed = %v", committed)
	}
	posts := decode[[]dltsim.Post](t, do(t, http.MethodGet, b.url+"/_sim/posts", nil, nil))
	want := []string{"rejected", "rejected", "rejected", "dropped-response", "timeout", "accepted", "accepted"}
	var got []string
	for _, p := range posts {
		got = append(got, p.Effect)
	}
	if !slices.Equal(got, want) || posts[0].At.IsZero() || posts[3].BatchID != id1 {
		t.Fatalf("posts = %+v, want effects %v", posts, want)
	}
}

func TestAdminBadRequests(t *testing.T) {
	t.Parallel()
	b := setup(t, dltsim.Config{})
	for _, path := range []string{
		"inject", "inject?status=abc", "inject?status=200", "inject?status=503&n=-1",
		"inject?timeout=soon", "inject?timeout=-1s", "inject?drop=x",
		"pause", "pause?on=maybe", "commit", "commit?n=-2",
	} {
		if a := do(t, http.MethodPost, b.url+"/_sim/"+path, nil, nil); a.status != 400 || len(a.body) == 0 {
			t.Errorf("POST /_sim/%s: %d %s, want 400 with a message", path, a.status, a.body)
		}
	}
	if a := do(t, http.MethodGet, b.url+"/_sim/restart", nil, nil); a.status != http.StatusMethodNotAllowed {
		t.Errorf("GET /_sim/restart: %d, want 405", a.status)
	}
	_, list := dlt.FakeBatch("svc", 1)
	if a := b.postList(t, list); a.status != 202 {
		t.Fatalf("no fault must be left over from bad requests: %d", a.status)
	}
}
