package node_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/ingest"
	"github.com/batchclaim/batchclaim/internal/dbtest"
	"github.com/batchclaim/batchclaim/node"
	"github.com/batchclaim/batchclaim/submitter"
)

// A Postgres-backed job runner: any Submitter, no ledger. Jobs of one key run one at a time in
// the order they were stored, spread over several instances; a job that fails with Retry runs
// again later, before the next job of its key.
func TestJobRunnerWithCustomSubmitter(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
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
	var mu sync.Mutex
	ran := map[string][]string{}    // key -> job ids in the order they finished
	running := map[string]bool{}    // key -> a job of it is running
	failedOnce := map[string]bool{} // job-2 of every key fails once with Retry
	var overlap []string
	job := submitter.SubmitterFunc(func(ctx context.Context, b batchclaim.Batch) (batchclaim.Result, error) {
		mu.Lock()
		if running[b.ServiceID] {
			overlap = append(overlap, b.ServiceID)
		}
		running[b.ServiceID] = true
		mu.Unlock()
		time.Sleep(time.Millisecond) // the job's own work
		mu.Lock()
		defer mu.Unlock()
		running[b.ServiceID] = false
		if b.BatchID == "job-2" && !failedOnce[b.ServiceID] {
			failedOnce[b.ServiceID] = true
			return batchclaim.Result{Verdict: batchclaim.Retry, Detail: "try again"}, nil
		}
		ran[b.ServiceID] = append(ran[b.ServiceID], b.BatchID)
		return batchclaim.Result{Verdict: batchclaim.Done}, nil
	})
	for _, name := range []string{"a", "b"} {
		n, err := node.New(newPool(t, url), node.Config{Claims: testClaims(name), Submitter: job, Workers: 3,
			BackoffBase: 10 * time.Millisecond, BackoffMax: 50 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		runCtx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- n.Run(runCtx) }()
		t.Cleanup(func() { cancel(); <-done })
	}
	waitFor(t, 30*time.Second, "every job done", func() bool {
		var open int
		err := admin.QueryRow(ctx, `SELECT count(*) FROM batches WHERE state <> 'COMMITTED'`).Scan(&open)
		return err == nil && open == 0
	})
	mu.Lock()
	defer mu.Unlock()
	if len(overlap) > 0 {
		t.Fatalf("two jobs of one key ran at once: %v", overlap)
	}
	for k := range keys {
		key := fmt.Sprintf("key-%d", k)
		if got := fmt.Sprint(ran[key]); got != "[job-0 job-1 job-2 job-3 job-4]" {
			t.Errorf("%s ran %s, want every job once, in order", key, got)
		}
	}
}
