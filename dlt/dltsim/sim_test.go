package dltsim_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/dlt"
	"github.com/batchclaim/batchclaim/dlt/dltsim"
	"github.com/batchclaim/batchclaim/testkit/testutil"
)

func forEachFlavor(t *testing.T, test func(t *testing.T, cfg dltsim.Config)) {
	t.Helper()
	for _, f := range []dlt.Flavor{dlt.FlavorSawtooth, dlt.FlavorScabbard} {
		t.Run(string(f), func(t *testing.T) {
			t.Parallel()
			test(t, dltsim.Config{Flavor: f})
		})
	}
}

func TestNewValidation(t *testing.T) {
	t.Parallel()
	tests := []struct {
		cfg  dltsim.Config
		want string
	}{
		{dltsim.Config{Flavor: "fabric"}, "unknown ledger flavor"},
		{dltsim.Config{CommitLatency: -1}, "commit latency"},
		{dltsim.Config{InvalidRate: 1.5}, "invalid rate"},
		{dltsim.Config{InvalidRate: -0.1}, "invalid rate"},
		{dltsim.Config{QueueHigh: -1}, "queue high"},
		{dltsim.Config{QueueHigh: 10, QueueLow: 11}, "queue low 11"},
		{dltsim.Config{QueueLow: -1}, "queue low"},
		{dltsim.Config{InvalidMemory: -1}, "invalid memory"},
		{dltsim.Config{RetryAfter: -1}, "retry-after"},
		{dltsim.Config{Circuit: "a/b"}, "circuit and service"},
	}
	for _, tt := range tests {
		if _, err := dltsim.New(tt.cfg); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("New(%+v) err = %v, want %q", tt.cfg, err, tt.want)
		}
	}
	sim, err := dltsim.New(dltsim.Config{})
	if err != nil || sim.Flavor() != dlt.FlavorSawtooth {
		t.Fatalf("zero config: %v, %v", sim, err)
	}
}

func TestHysteresis(t *testing.T) {
	t.Parallel()
	forEachFlavor(t, func(t *testing.T, cfg dltsim.Config) {
		cfg.QueueHigh, cfg.QueueLow, cfg.RetryAfter = 4, 2, time.Second
		b := setup(t, cfg)
		b.sim.SetPaused(true)
		n := 0
		next := func() answer {
			n++
			_, list := dlt.FakeBatch("svc", n)
			return b.postList(t, list)
		}
		for range 4 {
			if a := next(); a.status != 202 {
				t.Fatalf("filling: %d", a.status)
			}
		}
		wantFull := func(when string) {
			t.Helper()
			if a := next(); a.status != 429 || a.header.Get("Retry-After") != "1" {
				t.Fatalf("%s: %d Retry-After %q, want 429 with Retry-After 1", when, a.status, a.header.Get("Retry-After"))
			}
		}
		wantFull("at QueueHigh")
		b.sim.CommitNext(1)
		wantFull("between the marks")
		b.sim.CommitNext(1)
		wantFull("at QueueLow")
		b.sim.CommitNext(1)
		for range 3 { // 1 queued: accepted again up to QueueHigh
			if a := next(); a.status != 202 {
				t.Fatalf("below QueueLow: %d, want 202", a.status)
			}
		}
		wantFull("full again")
		b.sim.SetPaused(false)
		if a := next(); a.status != 202 || b.sim.Queued() != 0 {
			t.Fatalf("drained: %d, queued %d", a.status, b.sim.Queued())
		}
	})
}

func TestQueueDefaults(t *testing.T) {
	t.Parallel()
	forEachFlavor(t, func(t *testing.T, cfg dltsim.Config) {
		b := setup(t, cfg)
		b.sim.SetPaused(true)
		high := dltsim.SawtoothQueueHighDefault
		if cfg.Flavor == dlt.FlavorScabbard {
			high = dltsim.ScabbardQueueHighDefault
		}
		var all []byte
		for i := range high {
			_, list := dlt.FakeBatch("svc", i)
			all = append(all, list...)
		}
		if a := b.postList(t, all); a.status != 202 {
			t.Fatalf("one list of %d: %d", high, a.status)
		}
		if a := b.postList(t, all); a.status != 429 {
			t.Fatalf("at %d queued: %d, want 429", high, a.status)
		}
	})
}

func TestInjectStatus(t *testing.T) {
	t.Parallel()
	forEachFlavor(t, func(t *testing.T, cfg dltsim.Config) {
		cfg.RetryAfter = 3 * time.Second
		b := setup(t, cfg)
		b.sim.InjectStatus(503, 2)
		b.sim.InjectStatus(200, 5) // not an error status: ignored
		id, list := dlt.FakeBatch("svc", 1)
		for range 2 {
			if a := b.postList(t, list); a.status != 503 || a.header.Get("Retry-After") != "3" {
				t.Fatalf("injected: %d Retry-After %q", a.status, a.header.Get("Retry-After"))
			}
		}
		if a := b.postList(t, list); a.status != 202 {
			t.Fatalf("after the injections: %d", a.status)
		}
		want := []string{dltsim.EffectRejected, dltsim.EffectRejected, dltsim.EffectAccepted}
		if got := effectsOf(b.sim); !slices.Equal(got, want) {
			t.Fatalf("effects = %v, want %v", got, want)
		}
		if got := b.sim.Committed(); !slices.Equal(got, []string{id}) {
			t.Fatalf("committed = %v", got)
		}
	})
}

func TestInjectTimeouts(t *testing.T) {
	t.Parallel()
	forEachFlavor(t, func(t *testing.T, cfg dltsim.Config) {
		b := setup(t, cfg)
		b.sim.InjectTimeouts(1, time.Millisecond)
		id, list := dlt.FakeBatch("svc", 1)
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, b.url+b.batchesPath(), strings.NewReader(string(list)))
		req.Header.Set("Content-Type", "application/octet-stream")
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			t.Fatalf("held post answered %s", resp.Status)
		}
		if st := b.sim.Status(id); st != batchclaim.StatusUnknown {
			t.Fatalf("status %s, want UNKNOWN: a timed-out post is not accepted", st)
		}
		p := b.sim.Posts()
		if len(p) != 1 || p[0].Effect != dltsim.EffectTimeout || p[0].HTTPStatus != 0 || p[0].BatchID != id {
			t.Fatalf("posts = %+v", p)
		}
	})
}

func TestCloseReleasesHeldPosts(t *testing.T) {
	t.Parallel()
	b := setup(t, dltsim.Config{})
	b.sim.InjectTimeouts(1, time.Hour)
	_, list := dlt.FakeBatch("svc", 1)
	done := make(chan error, 1)
	go func() {
		resp, err := http.Post(b.url+"/batches", "application/octet-stream", strings.NewReader(string(list)))
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	testutil.WaitFor(t, 10*time.Second, "the post arrives", func() bool { return len(b.sim.Posts()) == 1 })
	if err := b.sim.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err == nil {
		t.Fatal("held post got an answer")
	}
}

func TestInjectDroppedResponses(t *testing.T) {
	t.Parallel()
	forEachFlavor(t, func(t *testing.T, cfg dltsim.Config) {
		b := setup(t, cfg)
		b.sim.InjectDroppedResponses(1)
		id, list := dlt.FakeBatch("svc", 1)
		resp, err := http.Post(b.url+b.batchesPath(), "application/octet-stream", strings.NewReader(string(list)))
		if err == nil {
			resp.Body.Close()
			t.Fatalf("dropped post answered %s", resp.Status)
		}
		if got := b.sim.Committed(); !slices.Equal(got, []string{id}) {
			t.Fatalf("committed = %v: a dropped response takes effect", got)
		}
		if a := b.postList(t, list); a.status != 202 {
			t.Fatalf("re-post: %d", a.status)
		}
		want := []string{dltsim.EffectDropped, dltsim.EffectDuplicate}
		if got := effectsOf(b.sim); !slices.Equal(got, want) {
			t.Fatalf("effects = %v, want %v", got, want)
		}
		if got := b.sim.Committed(); len(got) != 1 {
			t.Fatalf("committed twice: %v", got)
		}
	})
}

func TestCommitOrderAndRecording(t *testing.T) {
	t.Parallel()
	forEachFlavor(t, func(t *testing.T, cfg dltsim.Config) {
		cfg.CommitLatency = time.Second
		b := setup(t, cfg)
		var ids []string
		for i := range 6 {
			svc := fmt.Sprintf("svc-%d", i%2)
			ids = append(ids, b.postFake(t, svc, i))
			b.clock.Add(100 * time.Millisecond)
		}
		b.postFake(t, "svc-0", 0) // a duplicate
		b.sim.SetCommitLatency(0)
		if got := b.sim.Committed(); !slices.Equal(got, ids) {
			t.Fatalf("committed = %v, want arrival order %v", got, ids)
		}
		posts := b.sim.Posts()
		for i, p := range posts[:6] {
			if p.Seq != i+1 || p.BatchID != ids[i] || p.Service != fmt.Sprintf("svc-%d", i%2) || p.Effect != dltsim.EffectAccepted {
				t.Fatalf("post %d = %+v", i, p)
			}
		}
		if p := posts[6]; p.Effect != dltsim.EffectDuplicate || p.HTTPStatus != 202 || p.BatchID != ids[0] {
			t.Fatalf("duplicate post = %+v", p)
		}
	})
}

func TestLatencyWithClock(t *testing.T) {
	t.Parallel()
	forEachFlavor(t, func(t *testing.T, cfg dltsim.Config) {
		cfg.CommitLatency = time.Minute
		b := setup(t, cfg)
		id := b.postFake(t, "svc", 1)
		b.clock.Add(time.Minute - time.Nanosecond)
		if st := b.sim.Status(id); st == batchclaim.StatusCommitted {
			t.Fatal("committed before the latency passed")
		}
		b.clock.Add(time.Nanosecond)
		if st := b.sim.Status(id); st != batchclaim.StatusCommitted {
			t.Fatalf("status %s after the latency, want COMMITTED", st)
		}
	})
}

func TestInvalidRateIsDeterministic(t *testing.T) {
	t.Parallel()
	run := func(seed int64) []batchclaim.Status {
		b := setup(t, dltsim.Config{InvalidRate: 0.5, Seed: seed})
		var out []batchclaim.Status
		for i := range 40 {
			out = append(out, b.sim.Status(b.postFake(t, "svc", i)))
		}
		return out
	}
	a, again, other := run(1), run(1), run(2)
	if !slices.Equal(a, again) {
		t.Fatal("the same seed chose different invalid batches")
	}
	if slices.Equal(a, other) {
		t.Fatal("different seeds chose the same invalid batches")
	}
	invalid := 0
	for _, st := range a {
		if st == batchclaim.StatusInvalid {
			invalid++
		}
	}
	if invalid == 0 || invalid == len(a) {
		t.Fatalf("%d of %d invalid at rate 0.5", invalid, len(a))
	}
}

func TestAuthorization(t *testing.T) {
	t.Parallel()
	forEachFlavor(t, func(t *testing.T, cfg dltsim.Config) {
		cfg.Authorization = "Bearer x"
		b := setup(t, cfg)
		_, list := dlt.FakeBatch("svc", 1)
		if a := b.postList(t, list); a.status != http.StatusUnauthorized {
			t.Fatalf("no authorization: %d", a.status)
		}
		h := map[string]string{"Content-Type": "application/octet-stream", "Authorization": "Bearer x"}
		if a := do(t, http.MethodPost, b.url+b.batchesPath(), list, h); a.status != 202 {
			t.Fatalf("with authorization: %d", a.status)
		}
		id := strings.Repeat("0", 128)
		if a := do(t, http.MethodGet, b.url+b.statusesPath()+id, nil, nil); a.status != http.StatusUnauthorized {
			t.Fatalf("statuses without authorization: %d", a.status)
		}
	})
}

func TestConcurrentPosts(t *testing.T) {
	t.Parallel()
	forEachFlavor(t, func(t *testing.T, cfg dltsim.Config) {
		cfg.Now, cfg.HistoryLimit, cfg.QueueHigh = time.Now, -1, 1000
		b := setup(t, cfg)
		const workers, each = 8, 10
		errs := make(chan error, workers)
		for w := range workers {
			go func() {
				for i := range each {
					_, list := dlt.FakeBatch(fmt.Sprintf("svc-%d", w), i%5) // every batch twice
					resp, err := http.Post(b.url+b.batchesPath(), "application/octet-stream", strings.NewReader(string(list)))
					if err != nil {
						errs <- err
						return
					}
					resp.Body.Close()
					if resp.StatusCode != 202 {
						errs <- fmt.Errorf("post: %s", resp.Status)
						return
					}
					b.sim.Status(strings.Repeat("0", 128))
				}
				errs <- nil
			}()
		}
		for range workers {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		got := b.sim.Committed()
		if len(got) != workers*5 {
			t.Fatalf("%d committed, want %d distinct batches once each", len(got), workers*5)
		}
		dups := 0
		for _, p := range b.sim.Posts() {
			if p.Effect == dltsim.EffectDuplicate {
				dups++
			}
		}
		if dups != workers*5 {
			t.Fatalf("%d duplicates recorded, want %d", dups, workers*5)
		}
	})
}

// A hidden intake takes effect and drops the answer, like a dropped response, and the batch
// is reported UNKNOWN until its hiding time (at most the given one) has passed, then as the
// ledger has it.
func TestInjectHiddenIntake(t *testing.T) {
	t.Parallel()
	forEachFlavor(t, func(t *testing.T, cfg dltsim.Config) {
		b := setup(t, cfg)
		b.sim.InjectHiddenIntake(1, time.Hour)
		id, list := dlt.FakeBatch("svc", 7)
		resp, err := http.Post(b.url+b.batchesPath(), "application/octet-stream", strings.NewReader(string(list)))
		if err == nil {
			resp.Body.Close()
			t.Fatalf("hidden intake answered %s", resp.Status)
		}
		if got := b.sim.Committed(); !slices.Equal(got, []string{id}) {
			t.Fatalf("committed = %v: a hidden intake takes effect", got)
		}
		if st := b.sim.Status(id); st != batchclaim.StatusUnknown {
			t.Fatalf("status while hidden: %s, want UNKNOWN", st)
		}
		b.clock.Add(time.Hour)
		if st := b.sim.Status(id); st != batchclaim.StatusCommitted {
			t.Fatalf("status once shown: %s, want COMMITTED", st)
		}
		if got := effectsOf(b.sim); !slices.Equal(got, []string{dltsim.EffectDropped}) {
			t.Fatalf("effects = %v, want one dropped", got)
		}
	})
}
