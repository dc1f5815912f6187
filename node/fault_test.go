package node_test

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/batchclaim/batchclaim/dlt"
	"github.com/batchclaim/batchclaim/dlt/dltsim"
	"github.com/batchclaim/batchclaim/internal/history"
	"github.com/batchclaim/batchclaim/internal/tcpproxy"
)

// newProxy starts a TCP proxy to target that the test closes at its end.
func newProxy(t *testing.T, target string) *tcpproxy.Proxy {
	t.Helper()
	p, err := tcpproxy.Start("127.0.0.1:0", target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// TestDatabaseLinkCutAndBackendsKilled: instance a loses its database link for longer than
// expiry-2 while work is in flight, then gets it back; instance b's backends are killed with
// pg_terminate_backend. a must fence itself, b must take over, and in the end every batch is
// committed in order, with one owner at a time per service_id.
func TestDatabaseLinkCutAndBackendsKilled(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := setup(t, dlt.FlavorSawtooth, dltsim.Config{CommitLatency: 50 * time.Millisecond})
	u, err := url.Parse(e.url)
	if err != nil {
		t.Fatal(err)
	}
	p := newProxy(t, u.Host)
	viaProxy := *u
	viaProxy.Host = p.Addr()
	direct := *u
	q := direct.Query()
	q.Set("application_name", "node-b")
	direct.RawQuery = q.Encode()

	e.enqueue(8, 6)
	a, _ := e.startOn(viaProxy.String(), "a", nil)
	b, _ := e.startOn(direct.String(), "b", nil)
	waitFor(t, 30*time.Second, "both instances working", func() bool {
		return len(e.sim.Committed()) >= 8 && a.Engine().Stats().Held > 0 && b.Engine().Stats().Held > 0
	})

	p.Cut()
	waitFor(t, 30*time.Second, "a fenced itself and b holds every service_id", func() bool {
		var bHeld int
		_ = e.admin.QueryRow(ctx, `SELECT count(*) FROM service_id_claims WHERE claimant = $1`, b.Engine().InstanceID()).Scan(&bHeld)
		return a.Engine().Stats().DeadlineFences >= 1 && bHeld == 8
	})
	p.Restore()

	var killed int
	if err := e.admin.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = 'node-b'`).Scan(&killed); err != nil {
		t.Fatal(err)
	}
	if killed == 0 {
		t.Fatal("no backend of b to terminate")
	}
	e.waitFinished(60 * time.Second)
	e.check()
	rep, err := history.CheckClaims(ctx, e.admin)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Problems) > 0 {
		t.Fatalf("claim history: %v", rep.Problems)
	}
	if b.Engine().Stats().Voided == 0 {
		t.Fatal("b never took a claim over from a")
	}
}
