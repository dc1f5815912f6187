package node_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/claims"
	"github.com/batchclaim/batchclaim/dlt"
	"github.com/batchclaim/batchclaim/dlt/dltsim"
	"github.com/batchclaim/batchclaim/ingest"
	"github.com/batchclaim/batchclaim/node"
	"github.com/batchclaim/batchclaim/submitter"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
	"github.com/batchclaim/batchclaim/testkit/testutil"
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

// An enqueue whose transaction commits after its service_id moved to another instance is
// addressed to the former owner (the claim row as the INSERT saw it); the former owner passes
// the wake-up on to the new one, which would otherwise find the work only at its safety
// sweep. The new owner here is a registered instance that runs no cycle: the test listens on
// its channel.
func TestWakeFollowsTheKeyToItsNewOwner(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url := dbtest.NewDB(t)
	admin := newPool(t, url)
	ran := make(chan string, 4)
	a := runJobs(t, url, "a", submitter.SubmitterFunc(func(ctx context.Context, b batchclaim.Batch) (batchclaim.Result, error) {
		ran <- b.BatchID
		return batchclaim.Result{Verdict: batchclaim.Done}, nil
	}), sturdy) // a fence of its own would leave the warm-up to its adoption's grace
	if _, err := node.Enqueue(ctx, admin, "k", "warm-up", nil); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ran:
	case <-time.After(20 * time.Second):
		t.Fatal("the warm-up never ran")
	}
	x, err := claims.New(dbtest.Open(t, admin, ""), claims.Config{Name: "x", RenewInterval: 10 * time.Second, Expiry1: time.Minute, Expiry2: 2 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if err := x.Register(ctx); err != nil {
		t.Fatal(err)
	}
	listener, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer listener.Close(context.Background())
	if _, err := listener.Exec(ctx, "LISTEN "+pgx.Identifier{"batchclaim_work_" + strings.ReplaceAll(x.InstanceID().String(), "-", "")}.Sanitize()); err != nil {
		t.Fatal(err)
	}

	tx, err := admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := node.Enqueue(ctx, tx, "k", "late", nil); err != nil {
		t.Fatal(err)
	}
	// The key moves to x while the enqueue's transaction is open.
	if _, err := admin.Exec(ctx, `UPDATE batchclaim.service_id_claims SET claimant = $1, epoch = nextval('batchclaim.service_id_claim_epochs'), claimed_at = now() WHERE service_id = 'k'`, x.InstanceID()); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 20*time.Second, "a saw that k is not its own any more", func() bool { _, ok := a.Engine().Holds("k"); return !ok })
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	n, err := listener.WaitForNotification(wctx)
	if err != nil {
		t.Fatalf("k's new owner was never woken for the late enqueue: %v", err)
	}
	if n.Payload != "k" {
		t.Fatalf("k's new owner was woken with %q, want k", n.Payload)
	}
}
