package node

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batchclaim/batchclaim/testkit/dbtest"
	"github.com/batchclaim/batchclaim/testkit/testutil"
)

// A database link slower than a second per round trip keeps the instance ready while every
// ping is answered; a cut link makes it not ready within the window, and ready again once the
// link is back.
func TestReadinessRidesOutSlowAnswers(t *testing.T) {
	t.Parallel()
	proxy, viaProxy := dbtest.Proxied(t, dbtest.NewDB(t))
	pc, err := pgxpool.ParseConfig(viaProxy)
	if err != nil {
		t.Fatal(err)
	}
	p, err := newDBProber(t.Context(), pc, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.pool.Close)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); p.run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	testutil.WaitFor(t, 20*time.Second, "ready on a fast link", func() bool { return p.ready() == nil })

	other, err := pgx.Connect(t.Context(), viaProxy) // to time a ping without taking the prober's connection
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.Close(context.Background()) })
	proxy.SetLatency(700 * time.Millisecond) // each way: a ping takes about 1.4 s
	start := time.Now()
	if err := other.Ping(t.Context()); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < time.Second {
		t.Fatalf("a ping through the slowed link took %v, want over a second", d)
	}
	for deadline := time.Now().Add(3 * p.window); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if err := p.ready(); err != nil {
			t.Fatalf("not ready while every ping is answered in about 1.4 s: %v", err)
		}
	}

	proxy.Cut()
	cut := time.Now()
	testutil.WaitFor(t, 4*p.window, "not ready after the cut", func() bool { return p.ready() != nil })
	if d := time.Since(cut); d < p.window-2*time.Second { // the last answer may be up to ~1.4 s old at the cut
		t.Errorf("not ready %v after the cut, before the window (%v) could have passed", d, p.window)
	}
	if err := p.ready(); !strings.Contains(err.Error(), "no readiness ping answered for") {
		t.Errorf("error %q does not say how long the database has not answered", err)
	}
	proxy.Restore() // the latency too
	testutil.WaitFor(t, 20*time.Second, "ready again once the link is back", func() bool { return p.ready() == nil })
}

// Before the first answer the prober is not ready, and says so.
func TestReadinessBeforeTheFirstAnswer(t *testing.T) {
	t.Parallel()
	p := &dbProber{interval: ReadinessInterval, window: ReadinessWindow}
	if err := p.ready(); err == nil || !strings.Contains(err.Error(), "no readiness ping answered yet") {
		t.Fatalf("ready() before any ping: %v", err)
	}
}
