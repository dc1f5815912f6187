package node_test

import (
	"testing"
	"time"

	"github.com/batchclaim/batchclaim/claims"
	"github.com/batchclaim/batchclaim/dlt"
	"github.com/batchclaim/batchclaim/dlt/dltsim"
	"github.com/batchclaim/batchclaim/ingest"
	"github.com/batchclaim/batchclaim/internal/testutil"
	"github.com/batchclaim/batchclaim/node"
)

// slowClaims renew, cycle and poll once an hour: after its first cycle, an instance with these
// timings does nothing on its own for the length of a test, so only a wake-up can explain work
// it picks up.
func slowClaims(name string) claims.Config {
	return claims.Config{Name: name, RenewInterval: time.Hour, Expiry1: 4 * time.Hour}
}

// An enqueue wakes the instance that holds the service_id (LISTEN/NOTIFY), which hands the
// batch out without waiting for its next fetch; an enqueue for a service_id nobody holds wakes
// the claim cycles, and the instance that claims it hands it out; a listening connection that
// is killed is made again, and what was stored meanwhile is picked up.
func TestEnqueueWakesTheHolder(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	e := setup(t, dlt.FlavorSawtooth, dltsim.Config{})
	first := e.enqueue(1, 1)["svc-000"][0]
	n, _ := e.start("a", func(c *node.Config) { c.Claims = slowClaims("a") })
	testutil.WaitFor(t, 20*time.Second, "the first batch committed (first cycle and fetch)", func() bool { return e.state(first) == "COMMITTED" })

	store := func(svc string, b int) string {
		t.Helper()
		id, list := dlt.FakeBatch(svc, b)
		if _, err := ingest.Enqueue(ctx, e.admin, svc, id, list); err != nil {
			t.Fatal(err)
		}
		return id
	}
	held := store("svc-000", 1)
	testutil.WaitFor(t, 20*time.Second, "a batch of a held service_id committed after a wake-up", func() bool { return e.state(held) == "COMMITTED" })

	free := store("svc-new", 0)
	testutil.WaitFor(t, 20*time.Second, "a batch of a new service_id claimed and committed after a wake-up", func() bool { return e.state(free) == "COMMITTED" })
	if _, ok := n.Engine().Holds("svc-new"); !ok {
		t.Fatal("the new service_id is not held by the only instance")
	}

	var killed int
	if err := e.admin.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE datname = current_database() AND query LIKE 'LISTEN%'`).Scan(&killed); err != nil || killed != 1 {
		t.Fatalf("terminated %d listening connections (%v), want 1", killed, err)
	}
	after := store("svc-000", 2)
	testutil.WaitFor(t, 20*time.Second, "a batch stored while the listener reconnected committed", func() bool { return e.state(after) == "COMMITTED" })
	e.check()
}

// Without listening (NoListen, as behind a pooler in transaction mode), every renew interval
// looks at every held claim: a batch stored for any of them goes out at the next interval.
func TestNoListenPollsEveryHeldClaim(t *testing.T) {
	t.Parallel()
	e := setup(t, dlt.FlavorSawtooth, dltsim.Config{})
	e.enqueue(40, 1)
	e.start("a", func(c *node.Config) { c.NoListen = true })
	e.waitFinished(30 * time.Second)
	e.enqueue(40, 3)
	e.waitFinished(30 * time.Second)
	e.check()
}
