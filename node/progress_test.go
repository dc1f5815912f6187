package node_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/node"
	"github.com/batchclaim/batchclaim/submitter"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
	"github.com/batchclaim/batchclaim/testkit/testutil"
)

// By default a node works on a pool of its own (Config.SharePool false): an embedder whose
// own work holds every connection of the pool it passed to New does not starve the node.
func TestEmbedderHoldingItsPoolDoesNotStarveTheNode(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url := dbtest.NewDB(t)
	admin := newPool(t, url)
	ran := make(chan string, 16)
	passed := newPool(t, url) // the embedder's pool, passed to New
	a, _ := runJobsOn(t, passed, "a", submitter.SubmitterFunc(func(ctx context.Context, b batchclaim.Batch) (batchclaim.Result, error) {
		ran <- b.BatchID
		return batchclaim.Result{Verdict: batchclaim.Done}, nil
	}), nil)
	var held []*pgxpool.Conn
	t.Cleanup(func() {
		for _, c := range held {
			c.Release()
		}
	})
	for range passed.Config().MaxConns {
		c, err := passed.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	if _, err := node.Enqueue(ctx, admin, "k", "while-the-embedder-holds-its-pool", nil); err != nil {
		t.Fatal(err)
	}
	select {
	case id := <-ran:
		if id != "while-the-embedder-holds-its-pool" {
			t.Fatalf("ran %q", id)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the job never ran while the embedder held the pool it passed to New")
	}
	if s := a.Engine().Stats(); s.Stalls != 0 {
		t.Errorf("a's stats: %+v; want no stall", s)
	}
}

// An instance that shares its pool (Config.SharePool) with an embedder whose own work holds
// every connection cannot work: it stops renewing its lease (its lease loop's own connection would keep it
// alive), counts a stall, and a live peer takes its key and runs the job. Once the embedder
// lets go, the instance renews again.
func TestStarvedPoolGivesClaimsUp(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url := dbtest.NewDB(t)
	admin := newPool(t, url)
	ran := make(chan string, 16)
	job := func(name string) submitter.Submitter {
		return submitter.SubmitterFunc(func(ctx context.Context, b batchclaim.Batch) (batchclaim.Result, error) {
			ran <- name
			return batchclaim.Result{Verdict: batchclaim.Done}, nil
		})
	}
	shared := newPool(t, url) // the embedder's pool, which the node "a" uses as well
	logs := &testutil.SyncBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("a's log:\n%s", logs.String())
			logRows(t, admin, `SELECT service_id, claimant, epoch, phase FROM batchclaim.service_id_claims_effective`)
			logRows(t, admin, `SELECT name, expiry_1 > now(), expiry_2 > now() FROM batchclaim.instances`)
		}
	})
	a, _ := runJobsOn(t, shared, "a", job("a"), func(c *node.Config) {
		sturdy(c)
		c.SharePool = true
		c.Logger = slog.New(slog.NewTextHandler(logs, nil))
	})

	if _, err := node.Enqueue(ctx, admin, "k", "warm-up", nil); err != nil {
		t.Fatal(err)
	}
	select {
	case who := <-ran:
		if who != "a" {
			t.Fatalf("the warm-up ran on %s", who)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the warm-up never ran")
	}
	// The embedder's work takes every connection of the shared pool and keeps them.
	var held []*pgxpool.Conn
	for range shared.Config().MaxConns {
		c, err := shared.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	release := func() {
		for _, c := range held {
			c.Release()
		}
		held = nil
	}
	t.Cleanup(release)
	if _, err := node.Enqueue(ctx, admin, "k", "while-starved", nil); err != nil {
		t.Fatal(err)
	}
	runJobs(t, url, "b", job("b"), sturdy)
	select {
	case who := <-ran:
		if who != "b" {
			t.Fatalf("the job enqueued while a's pool was starved ran on %s, want the peer b", who)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no peer took the key of the starved instance")
	}
	if s := a.Engine().Stats(); s.Stalls == 0 {
		t.Errorf("a's stats after it gave its claims up: %+v; want a stall counted", s)
	}
	release()
	// Renewing again: a's lease is live and lasts.
	testutil.WaitFor(t, 20*time.Second, "a renews its lease again", func() bool {
		var live bool
		_ = admin.QueryRow(ctx, `SELECT expiry_1 > now() FROM batchclaim.instances WHERE name = 'a'`).Scan(&live)
		return live
	})
}

// A Submitter that does not return when its job's context ends holds its worker and its key
// for good: once the call runs more than 2 x Expiry1 past its deadline, the instance stops
// renewing, and a live peer takes the key and runs the job again.
func TestHungSubmitterGivesClaimsUp(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url := dbtest.NewDB(t)
	admin := newPool(t, url)
	unblock := make(chan struct{})
	t.Cleanup(func() { close(unblock) })
	ran := make(chan string, 4)
	hung := submitter.SubmitterFunc(func(ctx context.Context, b batchclaim.Batch) (batchclaim.Result, error) {
		ran <- "a"
		<-unblock // ignores ctx
		return batchclaim.Result{Verdict: batchclaim.Done}, nil
	})
	// sturdy: a fence of a's own before it posts would leave the job to its adoption's grace.
	// Its stop gives up on the hung call after MaxSubmission and StopTime.
	a := runJobs(t, url, "a", hung, sturdy)
	if _, err := node.Enqueue(ctx, admin, "k", "stuck", nil); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ran:
	case <-time.After(20 * time.Second):
		t.Fatal("the job never started on a")
	}
	runJobs(t, url, "b", submitter.SubmitterFunc(func(ctx context.Context, b batchclaim.Batch) (batchclaim.Result, error) {
		ran <- "b"
		return batchclaim.Result{Verdict: batchclaim.Done}, nil
	}), func(c *node.Config) { c.UnknownGrace = 200 * time.Millisecond }) // the adopted job's outcome is unknown
	select {
	case who := <-ran:
		if who != "b" {
			t.Fatalf("the stuck job ran again on %s, want the peer b", who)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("no peer took the key of the instance whose Submitter hangs")
	}
	if s := a.Engine().Stats(); s.Stalls == 0 {
		t.Errorf("a's stats: %+v; want a stall counted", s)
	}
}

// A stopping instance fetches nothing and runs no claim cycle while its running jobs drain;
// that is no stall: its lease lasts until a job longer than 2 x Expiry1 ends, and the job's outcome
// is recorded.
func TestDrainLongerThanExpiry1KeepsTheLease(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url := dbtest.NewDB(t)
	admin := newPool(t, url)
	entered := make(chan struct{})
	slow := submitter.SubmitterFunc(func(ctx context.Context, b batchclaim.Batch) (batchclaim.Result, error) {
		close(entered)
		select {
		case <-time.After(4 * time.Second): // 4 x Expiry1
			return batchclaim.Result{Verdict: batchclaim.Done}, nil
		case <-ctx.Done():
			return batchclaim.Result{}, ctx.Err()
		}
	})
	a, stop := runJobsOn(t, newPool(t, url), "a", slow, func(c *node.Config) {
		c.Claims.Expiry2, c.Claims.MaxSubmission = 12*time.Second, 6*time.Second
	})
	st, err := node.Enqueue(ctx, admin, "k", "slow", nil)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-entered:
	case <-time.After(20 * time.Second):
		t.Fatal("the job never started")
	}
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if state, _ := jobState(t, admin, st.Seq); state != "COMMITTED" {
		t.Errorf("the job that ran through the stop is %s, want COMMITTED (its lease should last the drain); stats %+v", state, a.Engine().Stats())
	}
}
