package node_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/ingest"
	"github.com/batchclaim/batchclaim/node"
	"github.com/batchclaim/batchclaim/submitter"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
	"github.com/batchclaim/batchclaim/testkit/testutil"
)

// A Postgres-backed job runner: any Submitter, no ledger. Jobs of one key run one at a time in
// the order they were stored, spread over several instances; a job that fails with Retry runs
// again later, before the next job of its key.
func TestJobRunnerWithCustomSubmitter(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url := dbtest.NewDB(t)
	admin := newPool(t, url)
	const keys, jobs = 6, 5
	for j := range jobs {
		for k := range keys {
			if _, err := ingest.Enqueue(ctx, admin, fmt.Sprintf("key-%d", k), fmt.Sprintf("job-%d", j), []byte(fmt.Sprint(j))); err != nil {
				t.Fatal(err)
			}
		}
	}
	log := newKeyLog()
	failedOnce := map[string]bool{} // job-2 of every key fails once with Retry
	job := log.submitter(time.Millisecond, func(b batchclaim.Batch) batchclaim.Result {
		if b.BatchID == "job-2" && !failedOnce[b.ServiceID] {
			failedOnce[b.ServiceID] = true
			return batchclaim.Result{Verdict: batchclaim.Retry, Detail: "try again"}
		}
		return batchclaim.Result{Verdict: batchclaim.Done}
	})
	for _, name := range []string{"a", "b"} {
		n, err := node.New(dbtest.Open(t, newPool(t, url), ""), node.Config{Claims: sturdyClaims(name), Submitter: job, Workers: 3,
			BackoffBase: 10 * time.Millisecond, BackoffMax: 50 * time.Millisecond,
			// On a loaded machine a local deadline can pass and cancel a job in flight: it
			// becomes UNKNOWN and, with no status source, waits out the grace before it runs
			// again. The default (30s) would outlast the test's wait.
			UnknownGrace: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		runCtx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- n.Run(runCtx) }()
		t.Cleanup(func() { cancel(); <-done })
	}
	t.Cleanup(func() {
		if t.Failed() { // what was left, for the log: the database is dropped after this
			logRows(t, admin, `SELECT b.service_id, b.seq, b.state, c.claimant, c.epoch, c.submitting_since, now()
				FROM batchclaim.batches b LEFT JOIN batchclaim.service_id_claims c USING (service_id) WHERE b.state <> 'COMMITTED' ORDER BY 1, 2`)
			logRows(t, admin, `SELECT * FROM batchclaim.batch_history ORDER BY at DESC LIMIT 10`)
		}
	})
	testutil.WaitFor(t, 30*time.Second, "every job done", func() bool {
		var open int
		err := admin.QueryRow(ctx, `SELECT count(*) FROM batchclaim.batches WHERE state <> 'COMMITTED'`).Scan(&open)
		return err == nil && open == 0
	})
	log.mu.Lock()
	defer log.mu.Unlock()
	if len(log.overlap) > 0 {
		t.Fatalf("two jobs of one key ran at once: %v", log.overlap)
	}
	for k := range keys {
		key := fmt.Sprintf("key-%d", k)
		if got := fmt.Sprint(log.ran[key]); got != "[job-0 job-1 job-2 job-3 job-4]" {
			t.Errorf("%s ran %s, want every job once, in order", key, got)
		}
	}
}

// A job finds the claim it runs under in its context and writes its effect fenced on it: the
// effect of each job is stored once, under the epoch its instance held.
func TestJobWritesItsEffectFencedOnItsClaim(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url := dbtest.NewDB(t)
	admin := newPool(t, url)
	if _, err := admin.Exec(ctx, `CREATE TABLE effects (service_id text, batch_id text, epoch bigint)`); err != nil {
		t.Fatal(err)
	}
	for j := range 3 {
		if _, err := node.Enqueue(ctx, admin, "key", fmt.Sprintf("job-%d", j), nil); err != nil {
			t.Fatal(err)
		}
	}
	var n *node.Node
	job := submitter.SubmitterFunc(func(ctx context.Context, b batchclaim.Batch) (batchclaim.Result, error) {
		c, ok := batchclaim.ClaimFrom(ctx)
		if !ok || c.ServiceID != b.ServiceID {
			return batchclaim.Result{Verdict: batchclaim.Rejected, Detail: "no claim in the job's context"}, nil
		}
		err := n.Engine().WriteFenced(ctx, c, func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, `INSERT INTO effects VALUES ($1, $2, $3)`, b.ServiceID, b.BatchID, c.Epoch)
			return err
		})
		if err != nil {
			return batchclaim.Result{}, err
		}
		return batchclaim.Result{Verdict: batchclaim.Done}, nil
	})
	var err error
	n, err = node.New(dbtest.Open(t, newPool(t, url), ""), node.Config{Claims: sturdyClaims("a"), Submitter: job})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	go func() { _ = n.Run(runCtx) }()
	testutil.WaitFor(t, 30*time.Second, "every job committed", func() bool {
		var open int
		_ = admin.QueryRow(ctx, `SELECT count(*) FROM batchclaim.batches WHERE unfinished`).Scan(&open)
		return open == 0
	})
	var rows, epochs int
	var held int64
	if err := admin.QueryRow(ctx, `SELECT count(*), count(DISTINCT epoch), max(epoch) FROM effects`).Scan(&rows, &epochs, &held); err != nil {
		t.Fatal(err)
	}
	c, _ := n.Engine().Holds("key")
	if rows != 3 || epochs != 1 || held != c.Epoch {
		t.Fatalf("effects: %d rows under %d epochs (last %d), want 3 under the one epoch held (%d)", rows, epochs, held, c.Epoch)
	}
}
