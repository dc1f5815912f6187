package httpguard_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batchclaim/batchclaim/httpguard"
)

// timers are a Throttle's interval timers, ended by the test.
type timers struct {
	mu      sync.Mutex
	pending []*timer
}

type timer struct {
	f       func()
	stopped bool
}

func (ts *timers) after(_ time.Duration, f func()) func() bool {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	tm := &timer{f: f}
	ts.pending = append(ts.pending, tm)
	return func() bool {
		ts.mu.Lock()
		defer ts.mu.Unlock()
		was := !tm.stopped
		tm.stopped = true
		return was
	}
}

// fire ends every interval armed so far that was not stopped (as the timers would).
func (ts *timers) fire() {
	ts.mu.Lock()
	due := ts.pending
	ts.pending = nil
	ts.mu.Unlock()
	for _, tm := range due {
		if !tm.stopped {
			tm.f()
		}
	}
}

func TestThrottle(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	th := httpguard.NewThrottle(slog.New(slog.NewTextHandler(&buf, nil)), 10*time.Second)
	var ts timers
	th.SetAfter(ts.after)
	ctx := context.Background()
	lines := func() []string {
		s := strings.TrimSpace(buf.String())
		buf.Reset()
		if s == "" {
			return nil
		}
		return strings.Split(s, "\n")
	}
	expect := func(step string, want ...string) {
		t.Helper()
		got := lines()
		if len(got) != len(want) {
			t.Fatalf("%s: %d lines, want %d:\n%s", step, len(got), len(want), strings.Join(got, "\n"))
		}
		for i, w := range want {
			if !strings.Contains(got[i], w) {
				t.Fatalf("%s: line %q lacks %q", step, got[i], w)
			}
		}
	}

	for i := range 1000 {
		th.Log(ctx, slog.LevelError, "store batches", "attempt", i)
	}
	expect("1,000 lines of one site", `level=ERROR msg="store batches" attempt=0`)
	th.Log(ctx, slog.LevelWarn, "status page: search", "error", "x")
	expect("another site", `level=WARN msg="status page: search" error=x`)
	ts.fire()
	expect("the end of the interval", `level=ERROR msg="store batches: 999 more like this in the last 10s" attempt=999`)
	for range 5 {
		th.Log(ctx, slog.LevelError, "store batches")
	}
	expect("the flood goes on")
	ts.fire()
	expect("the next interval", `msg="store batches: 5 more like this in the last 10s"`)
	ts.fire()
	expect("an interval without lines")
	th.Log(ctx, slog.LevelError, "store batches", "attempt", 1001)
	expect("after an interval without lines", `msg="store batches" attempt=1001`)

	th.Log(ctx, slog.LevelError, "store batches")
	if !th.Clear("store batches") {
		t.Error("Clear of a site that wrote: false")
	}
	expect("Clear", `msg="store batches: 1 more like this in the last 10s"`)
	if th.Clear("store batches") || th.Clear("never written") {
		t.Error("Clear of a site that wrote nothing since: true")
	}
	ts.fire() // the cleared interval's timer, stopped, and the search site's
	th.Log(ctx, slog.LevelError, "store batches", "attempt", 1002)
	expect("after Clear", `msg="store batches" attempt=1002`)
}
