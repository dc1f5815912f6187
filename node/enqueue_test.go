package node_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/node"
	"github.com/batchclaim/batchclaim/submitter"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
	"github.com/batchclaim/batchclaim/testkit/testutil"
)

// Jobs stored by EnqueueMany and by single enqueues, on a pool and while two nodes run, all
// run: each key's jobs in the order they were stored, one at a time. Every enqueue here is
// its own transaction, whose holder is woken just after its commit.
func TestEnqueueManyRunsEveryKeyInOrder(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url := dbtest.NewDB(t)
	admin := newPool(t, url)
	var mu sync.Mutex
	ran := map[string][]string{} // key -> job ids in the order they ran
	running := map[string]bool{}
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
		ran[b.ServiceID] = append(ran[b.ServiceID], b.BatchID)
		return batchclaim.Result{Verdict: batchclaim.Done}, nil
	})
	for _, name := range []string{"a", "b"} {
		n, err := node.New(dbtest.Open(t, newPool(t, url), ""), node.Config{Claims: testClaims(name), Submitter: job, Workers: 4, UnknownGrace: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		runCtx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- n.Run(runCtx) }()
		t.Cleanup(func() { cancel(); <-done })
	}
	const keys, rounds = 8, 4
	want := map[string][]string{}
	total := 0
	for r := range rounds {
		var jobs []node.Job
		for i := range 5 {
			for k := range keys {
				key, id := fmt.Sprintf("key-%d", k), fmt.Sprintf("r%d-set-%d", r, i)
				jobs = append(jobs, node.Job{ServiceID: key, BatchID: id})
				want[key] = append(want[key], id)
			}
		}
		stored, err := node.EnqueueMany(ctx, admin, jobs)
		if err != nil {
			t.Fatal(err)
		}
		total += len(stored)
		for k := range keys {
			key, id := fmt.Sprintf("key-%d", k), fmt.Sprintf("r%d-single", r)
			if _, err := node.Enqueue(ctx, admin, key, id, nil); err != nil {
				t.Fatal(err)
			}
			want[key] = append(want[key], id)
			total++
		}
	}
	testutil.WaitFor(t, time.Minute, "every job run", func() bool {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, ids := range ran {
			n += len(ids)
		}
		return n == total
	})
	mu.Lock()
	defer mu.Unlock()
	if len(overlap) > 0 {
		t.Errorf("two jobs of one key ran at once: %v", overlap)
	}
	for key, ids := range want {
		if !slices.Equal(ran[key], ids) {
			t.Errorf("%s ran %v, want %v", key, ran[key], ids)
		}
	}
}
