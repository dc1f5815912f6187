package heartbeat_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/batchclaim/batchclaim/patterns/heartbeat"
)

// receiver is a webhook that fails its first failures requests and records the rest.
type receiver struct {
	mu       sync.Mutex
	failures int
	keys     []string
	bodies   []heartbeat.Event
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.failures > 0 {
		r.failures--
		http.Error(w, "busy", http.StatusServiceUnavailable)
		return
	}
	var e heartbeat.Event
	if err := json.Unmarshal(body, &e); err != nil || req.Header.Get("Content-Type") != "application/json" {
		http.Error(w, "bad event", http.StatusBadRequest)
		return
	}
	r.keys = append(r.keys, req.Header.Get("Idempotency-Key"))
	r.bodies = append(r.bodies, e)
}

// Stored events reach the hook and the webhook in order per source, failed deliveries are
// retried after a backoff, and a deliverer that starts later (a new active instance)
// delivers what an earlier one stored and did not deliver.
func TestOutboxDeliversAtLeastOnceInOrder(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	b := setup(t, eventType("hb", time.Second, 1))
	for _, src := range []string{"s1", "s2"} {
		b.beat(t, "hb", src)
		b.age(t, "hb", src, 10*time.Second)
	}
	b.step(t, nil) // raises s1, s2
	b.beat(t, "hb", "s1")
	b.step(t, nil) // clears s1
	if n, err := heartbeat.PendingDeliveries(ctx, b.pool); err != nil || n != 3 {
		t.Fatalf("pending %d (%v), want 3", n, err)
	}

	rcv := &receiver{failures: 2}
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	var hooked []string
	var hookFails = 1
	d := heartbeat.NewDeliverer(b.pool, heartbeat.Config{
		WebhookURL: srv.URL, RetryBase: time.Millisecond, RetryMax: 5 * time.Millisecond,
		OnEvent: func(_ context.Context, e heartbeat.Event) error {
			if hookFails > 0 {
				hookFails--
				return errors.New("hook not ready")
			}
			hooked = append(hooked, e.Key())
			return nil
		},
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := d.Drain(ctx); err != nil {
			t.Fatal(err)
		}
		n, err := heartbeat.PendingDeliveries(ctx, b.pool)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d events still undelivered", n)
		}
		time.Sleep(5 * time.Millisecond) // the retry delay is a few ms of database time
	}
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	pos := map[string]int{}
	for i, k := range rcv.keys {
		if _, dup := pos[k]; dup {
			continue // at least once: a repeat is allowed, but here none is expected
		}
		pos[k] = i
	}
	if len(pos) != 3 || pos["hb/s1/1/raised"] > pos["hb/s1/1/cleared"] {
		t.Fatalf("webhook got %v, want 3 events with s1's raise before its clear", rcv.keys)
	}
	for _, e := range rcv.bodies {
		if e.ControlLoop.PolicyName != "hb-policy" || e.Episode != 1 || e.InstanceID != b.id {
			t.Fatalf("webhook body %+v", e)
		}
	}
	if len(hooked) < 3 {
		t.Fatalf("hook got %v, want every event", hooked)
	}
	var attempts int
	if err := b.pool.QueryRow(ctx, "SELECT sum(attempts) FROM batchclaim.heartbeat_events").Scan(&attempts); err != nil {
		t.Fatal(err)
	}
	if attempts != 3+2+1 {
		t.Fatalf("%d attempts recorded, want 3 deliveries + 2 webhook failures + 1 hook failure", attempts)
	}
}

func TestRetryDelayDoublesUpToTheCap(t *testing.T) {
	t.Parallel()
	d := heartbeat.NewDeliverer(nil, heartbeat.Config{RetryBase: 100 * time.Millisecond, RetryMax: time.Second})
	for _, tc := range []struct {
		failures int
		lo, hi   time.Duration
	}{{1, 80 * time.Millisecond, 120 * time.Millisecond}, {2, 160 * time.Millisecond, 240 * time.Millisecond},
		{3, 320 * time.Millisecond, 480 * time.Millisecond}, {20, 800 * time.Millisecond, 1200 * time.Millisecond}} {
		if got := d.RetryDelay(tc.failures); got < tc.lo || got > tc.hi {
			t.Errorf("delay after %d failures = %s, want in [%s, %s]", tc.failures, got, tc.lo, tc.hi)
		}
	}
}
