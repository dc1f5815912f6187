package dlt_test

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/dlt"
	"github.com/batchclaim/batchclaim/dlt/dltsim"
)

func TestStatusesInvalidTransactions(t *testing.T) {
	t.Parallel()
	forEachFlavor(t, func(t *testing.T, flavor dlt.Flavor) {
		b := setup(t, flavor, options{sim: dltsim.Config{InvalidRate: 1}})
		id, list := dlt.FakeBatch("svc", 1)
		post(t, b.client, list)
		st := waitStatus(t, b.client, id, batchclaim.StatusInvalid)
		batches, _ := dlt.SplitBatchList(list)
		want := batchclaim.InvalidTransaction{ID: batches[0].TransactionIDs[0], Message: "simulated invalid transaction", ExtendedData: []byte("dltsim")}
		if len(st.Invalid) != 1 || st.Invalid[0].ID != want.ID || st.Invalid[0].Message != want.Message ||
			string(st.Invalid[0].ExtendedData) != string(want.ExtendedData) {
			t.Fatalf("invalid = %+v, want [%+v]", st.Invalid, want)
		}
	})
}

func TestStatusesLifecycle(t *testing.T) {
	t.Parallel()
	forEachFlavor(t, func(t *testing.T, flavor dlt.Flavor) {
		b := setup(t, flavor, options{fakeClock: true, sim: dltsim.Config{CommitLatency: 10 * time.Second}})
		id, list := dlt.FakeBatch("svc", 1)
		never, _ := dlt.FakeBatch("svc", 2)
		post(t, b.client, list)
		check := func(want batchclaim.Status) {
			t.Helper()
			sts := statuses(t, b.client, id, never)
			if sts[0].ID != id || sts[0].Status != want || sts[1].ID != never || sts[1].Status != batchclaim.StatusUnknown {
				t.Fatalf("statuses = %+v, want %s and UNKNOWN", sts, want)
			}
		}
		check(batchclaim.StatusPending)
		b.clock.Add(5 * time.Second)
		if flavor == dlt.FlavorScabbard {
			check(batchclaim.StatusValid)
		} else {
			check(batchclaim.StatusPending)
		}
		b.clock.Add(5 * time.Second)
		check(batchclaim.StatusCommitted)
	})
}

// countIDs wraps a handler and records how many ids each status request carried.
type countIDs struct {
	mu     sync.Mutex
	counts []int
}

func (c *countIDs) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/batch_statuses") {
			q := r.URL.Query()
			ids := q.Get("id") + q.Get("ids")
			c.mu.Lock()
			c.counts = append(c.counts, len(strings.Split(ids, ",")))
			c.mu.Unlock()
		}
		h.ServeHTTP(w, r)
	})
}

func TestStatusesSplitsLargeRequests(t *testing.T) {
	t.Parallel()
	tests := map[dlt.Flavor]struct {
		n    int
		want []int
	}{
		dlt.FlavorSawtooth: {40, []int{10, 15, 15}},
		dlt.FlavorScabbard: {120, []int{20, 50, 50}},
	}
	forEachFlavor(t, func(t *testing.T, flavor dlt.Flavor) {
		var counter countIDs
		b := setup(t, flavor, options{wrap: counter.wrap, sim: dltsim.Config{QueueHigh: 1000, HistoryLimit: -1}})
		tt := tests[flavor]
		var ids []string
		var all []byte
		for i := range tt.n {
			id, list := dlt.FakeBatch("svc", i)
			ids, all = append(ids, id), append(all, list...)
		}
		if res := post(t, b.client, all); res.Verdict != batchclaim.Accepted {
			t.Fatalf("post: %+v", res)
		}
		asked := append(slices.Clone(ids), ids[0], ids[1]) // repeats are dropped
		sts, err := b.client.Statuses(t.Context(), asked)
		if err != nil {
			t.Fatal(err)
		}
		if len(sts) != tt.n {
			t.Fatalf("got %d statuses, want %d", len(sts), tt.n)
		}
		for i, st := range sts {
			if st.ID != ids[i] || st.Status != batchclaim.StatusCommitted {
				t.Fatalf("status %d = %+v, want %s COMMITTED", i, st, ids[i][:8])
			}
		}
		counter.mu.Lock()
		defer counter.mu.Unlock()
		slices.Sort(counter.counts)
		if !slices.Equal(counter.counts, tt.want) {
			t.Fatalf("ids per request = %v, want %v", counter.counts, tt.want)
		}
	})
}

func TestStatusesLocalChecks(t *testing.T) {
	t.Parallel()
	forEachFlavor(t, func(t *testing.T, flavor dlt.Flavor) {
		b := setup(t, flavor, options{})
		if sts, err := b.client.Statuses(t.Context(), nil); err != nil || sts != nil {
			t.Fatalf("no ids: %v, %v", sts, err)
		}
		if _, err := b.client.Statuses(t.Context(), []string{"abc"}); err == nil || !strings.Contains(err.Error(), `"abc"`) {
			t.Fatalf("bad id: err = %v", err)
		}
	})
}

// answer serves fixed status answers naming the given ids.
func answer(flavor dlt.Flavor, ids ...string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var entries []string
		for _, id := range ids {
			if flavor == dlt.FlavorSawtooth {
				entries = append(entries, fmt.Sprintf(`{"id":%q,"status":"COMMITTED","invalid_transactions":[]}`, id))
			} else {
				entries = append(entries, fmt.Sprintf(`{"id":%q,"status":{"statusType":"Committed","message":[]}}`, id))
			}
		}
		body := "[" + strings.Join(entries, ",") + "]"
		if flavor == dlt.FlavorSawtooth {
			body = `{"data":` + body + `}`
		}
		_, _ = w.Write([]byte(body))
	})
}

func TestStatusesAnswerChecks(t *testing.T) {
	t.Parallel()
	a, b, stranger := strings.Repeat("a", 128), strings.Repeat("b", 128), strings.Repeat("f", 128)
	forEachFlavor(t, func(t *testing.T, flavor dlt.Flavor) {
		missing := setup(t, flavor, options{wrap: func(http.Handler) http.Handler { return answer(flavor, b) }})
		sts := statuses(t, missing.client, a, b)
		if sts[0].Status != batchclaim.StatusUnknown || sts[1].Status != batchclaim.StatusCommitted {
			t.Fatalf("statuses = %+v, want the missing id UNKNOWN", sts)
		}
		unexpected := setup(t, flavor, options{wrap: func(http.Handler) http.Handler { return answer(flavor, a, stranger) }})
		if _, err := unexpected.client.Statuses(t.Context(), []string{a}); err == nil || !strings.Contains(err.Error(), stranger) {
			t.Fatalf("unexpected id: err = %v, want it to name the id", err)
		}
	})
}

func TestStatusesBadAnswers(t *testing.T) {
	t.Parallel()
	id := strings.Repeat("a", 128)
	bodies := map[string]string{
		"not json":       `<html>`,
		"unknown status": `{"data":[{"id":"` + id + `","status":"MAYBE"}]}`,
	}
	scabbardBodies := map[string]string{
		"not json":       `<html>`,
		"unknown status": `[{"id":"` + id + `","status":{"statusType":"Maybe","message":[]}}]`,
	}
	forEachFlavor(t, func(t *testing.T, flavor dlt.Flavor) {
		set := bodies
		if flavor == dlt.FlavorScabbard {
			set = scabbardBodies
		}
		for name, body := range set {
			b := setup(t, flavor, options{wrap: func(http.Handler) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(body)) })
			}})
			if _, err := b.client.Statuses(t.Context(), []string{id}); err == nil {
				t.Errorf("%s: no error", name)
			}
		}
	})
}

func TestStatusesHTTPError(t *testing.T) {
	t.Parallel()
	forEachFlavor(t, func(t *testing.T, flavor dlt.Flavor) {
		b := setup(t, flavor, options{wrap: func(http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Retry-After", "4")
				w.WriteHeader(http.StatusServiceUnavailable)
			})
		}})
		_, err := b.client.Statuses(t.Context(), []string{strings.Repeat("a", 128)})
		var herr *dlt.HTTPError
		if !errors.As(err, &herr) || herr.StatusCode != 503 || herr.RetryAfter != 4*time.Second ||
			herr.Detail != "Service Unavailable" {
			t.Fatalf("err = %#v, want HTTPError 503 with Retry-After 4s", err)
		}
	})
}

func TestStatusesAfterRestartAndEviction(t *testing.T) {
	t.Parallel()
	forEachFlavor(t, func(t *testing.T, flavor dlt.Flavor) {
		b := setup(t, flavor, options{sim: dltsim.Config{HistoryLimit: 2}})
		var ids []string
		for i := range 3 {
			id, list := dlt.FakeBatch("svc", i)
			post(t, b.client, list)
			ids = append(ids, id)
		}
		first := batchclaim.StatusCommitted // sawtooth keeps every commit
		if flavor == dlt.FlavorScabbard {
			first = batchclaim.StatusUnknown // evicted from the history of 2
		}
		sts := statuses(t, b.client, ids...)
		if sts[0].Status != first || sts[1].Status != batchclaim.StatusCommitted || sts[2].Status != batchclaim.StatusCommitted {
			t.Fatalf("statuses = %+v, want %s, COMMITTED, COMMITTED", sts, first)
		}
		b.sim.Restart()
		after := batchclaim.StatusCommitted
		if flavor == dlt.FlavorScabbard {
			after = batchclaim.StatusUnknown
		}
		if st := statuses(t, b.client, ids[2])[0]; st.Status != after {
			t.Fatalf("after restart: %+v, want %s", st, after)
		}
		_, list := dlt.FakeBatch("svc", 2)
		if res := post(t, b.client, list); res.Verdict != batchclaim.Accepted {
			t.Fatalf("re-post after restart: %+v", res)
		}
		if st := statuses(t, b.client, ids[2])[0]; st.Status != batchclaim.StatusCommitted {
			t.Fatalf("after re-post: %+v, want COMMITTED", st)
		}
		if got := b.sim.Committed(); !slices.Equal(got, ids) {
			t.Fatalf("committed = %v, want each batch once", got)
		}
	})
}
