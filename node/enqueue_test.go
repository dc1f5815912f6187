package node_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/batchclaim/batchclaim/node"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
	"github.com/batchclaim/batchclaim/testkit/testutil"
)

// Jobs stored by EnqueueMany and by single enqueues, with ids and without, on a pool and while
// two nodes run, all run: each key's jobs in the order they were stored, one at a time. Every
// enqueue here is its own transaction, whose holder is woken just after its commit. A job may
// run again right after itself only as a recorded further attempt (its outcome was not
// recorded: an instance that missed its local deadline on a loaded machine fenced itself,
// and the batch was adopted and run again), never out of order.
func TestEnqueueManyRunsEveryKeyInOrder(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url := dbtest.NewDB(t)
	admin := newPool(t, url)
	log := newKeyLog()
	job := log.submitter(time.Millisecond, nil)
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
				if i%2 == 1 { // no id: named by its payload
					jobs = append(jobs, node.Job{ServiceID: key, Payload: []byte(id)})
					want[key] = append(want[key], "#"+id)
					continue
				}
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
			if _, err := node.Enqueue(ctx, admin, key, "", []byte(id+"-no-id")); err != nil {
				t.Fatal(err)
			}
			want[key] = append(want[key], id, "#"+id+"-no-id")
			total += 2
		}
	}
	testutil.WaitFor(t, time.Minute, "every job run and finished", func() bool {
		var finished int
		if err := admin.QueryRow(ctx, `SELECT count(*) FROM batchclaim.batches WHERE NOT unfinished`).Scan(&finished); err != nil {
			t.Fatal(err)
		}
		return finished == total
	})
	attempts := map[string]int{} // key/job id -> attempts recorded
	rows, err := admin.Query(ctx, `SELECT service_id, CASE WHEN batch_id = '' THEN '#' || convert_from(payload, 'UTF8') ELSE batch_id END,
		attempts FROM batchclaim.batches`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var key, id string
		var n int
		if err := rows.Scan(&key, &id, &n); err != nil {
			t.Fatal(err)
		}
		attempts[key+"/"+id] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	if len(log.overlap) > 0 {
		t.Errorf("two jobs of one key ran at once: %v", log.overlap)
	}
	for key, ids := range want {
		runs := map[string]int{}
		for _, id := range log.ran[key] {
			runs[id]++
		}
		if got := slices.Compact(slices.Clone(log.ran[key])); !slices.Equal(got, ids) {
			t.Errorf("%s ran %v, want %v", key, log.ran[key], ids)
		}
		for id, n := range runs {
			if n > 1 {
				t.Logf("%s: %s ran %d times, %d attempts recorded", key, id, n, attempts[key+"/"+id])
			}
			if n > attempts[key+"/"+id] {
				t.Errorf("%s: %s ran %d times, %d attempts recorded", key, id, n, attempts[key+"/"+id])
			}
		}
	}
}
