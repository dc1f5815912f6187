package node_test

import (
	"net/url"
	"testing"
	"time"

	"github.com/batchclaim/batchclaim/dlt"
	"github.com/batchclaim/batchclaim/dlt/dltsim"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
	"github.com/batchclaim/batchclaim/testkit/history"
	"github.com/batchclaim/batchclaim/testkit/testutil"
)

// TestDatabaseLinkCutAndBackendsKilled: instance a loses its database link for longer than
// expiry-2 while work is in flight, then gets it back; instance b's backends are killed with
// pg_terminate_backend. a must fence itself, b must take over, and in the end every batch is
// committed in order, with one owner at a time per service_id.
func TestDatabaseLinkCutAndBackendsKilled(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	e := setup(t, dlt.FlavorSawtooth, dltsim.Config{CommitLatency: 50 * time.Millisecond})
	u, err := url.Parse(e.url)
	if err != nil {
		t.Fatal(err)
	}
	p, viaProxy := dbtest.Proxied(t, e.url)
	direct := *u
	q := direct.Query()
	q.Set("application_name", "node-b")
	direct.RawQuery = q.Encode()

	e.enqueue(8, 6)
	a, _ := e.startOn(viaProxy, "a", nil)
	b, _ := e.startOn(direct.String(), "b", nil)
	testutil.WaitFor(t, 30*time.Second, "both instances working", func() bool {
		return len(e.sim.Committed()) >= 8 && a.Engine().Stats().Held > 0 && b.Engine().Stats().Held > 0
	})

	p.Cut()
	testutil.WaitFor(t, 30*time.Second, "a fenced itself and b holds every service_id", func() bool {
		var bHeld int
		_ = e.admin.QueryRow(ctx, `SELECT count(*) FROM batchclaim.service_id_claims WHERE claimant = $1`, b.Engine().InstanceID()).Scan(&bHeld)
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

// TestFrozenDatabaseLink: every connection instance a holds freezes (no byte, no reset) while
// new connections still reach the database, as when a primary vanishes behind an address that
// a replacement then answers. a's lease loop redials and keeps its lease alive, so nobody may
// take a's claims: a itself must give up the frozen connections (its claim cycle, fetches,
// writes and wake-up listener are bounded) and go on working on new ones. A batch stored
// after the freeze is committed, in order, with every invariant kept.
func TestFrozenDatabaseLink(t *testing.T) {
	t.Parallel()
	e := setup(t, dlt.FlavorSawtooth, dltsim.Config{})
	p, viaProxy := dbtest.Proxied(t, e.url)

	ids := e.enqueue(4, 1)
	a, _ := e.startOn(viaProxy, "a", nil)
	e.waitFinished(30 * time.Second)
	if a.Engine().Stats().Held != 4 {
		t.Fatalf("a holds %d claims, want all 4", a.Engine().Stats().Held)
	}

	p.Freeze()
	more := e.enqueue(4, 2) // batch 1 of each service_id: stored after the freeze
	e.waitFinished(60 * time.Second)
	e.check()
	for svc := range ids {
		if got := e.state(more[svc][1]); got != "COMMITTED" {
			t.Fatalf("%s: batch stored after the freeze is %s", svc, got)
		}
	}
}
