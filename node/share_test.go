package node_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/ingest"
	"github.com/batchclaim/batchclaim/node"
	"github.com/batchclaim/batchclaim/submitter"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
	"github.com/batchclaim/batchclaim/testkit/testutil"
)

// An instance that joins while every key has a backlog gets its share of the keys before the
// backlog drains: the first instance's surplus claims yield (no new job starts on them) and
// are given back as their running jobs end. Before, a claim with a job in flight was never
// given back, each outcome chained the key's next job, and the joining instance did nothing
// until the first had run everything. Through the handover, each key runs one job at a time,
// every job once, in the order stored.
func TestJoiningInstanceGetsItsShareUnderLoad(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url := dbtest.NewDB(t)
	admin := newPool(t, url)
	const keys, perKey = 10, 600
	jobs := make([]ingest.Job, 0, keys*perKey)
	for j := range perKey {
		for k := range keys {
			jobs = append(jobs, ingest.Job{ServiceID: fmt.Sprintf("key-%d", k), BatchID: fmt.Sprintf("job-%04d", j)})
		}
	}
	if _, err := ingest.EnqueueMany(ctx, admin, jobs); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	ran := map[string][]string{}           // key -> job ids in the order they ran
	byNode := map[string]int{}             // node -> jobs it ran
	keysOf := map[string]map[string]bool{} // node -> keys it ran jobs of
	running := map[string]bool{}
	var overlap []string
	worker := func(name string) submitter.Submitter {
		return submitter.SubmitterFunc(func(ctx context.Context, b batchclaim.Batch) (batchclaim.Result, error) {
			mu.Lock()
			if running[b.ServiceID] {
				overlap = append(overlap, b.ServiceID)
			}
			running[b.ServiceID] = true
			mu.Unlock()
			time.Sleep(2 * time.Millisecond) // the job's own work
			mu.Lock()
			defer mu.Unlock()
			running[b.ServiceID] = false
			ran[b.ServiceID] = append(ran[b.ServiceID], b.BatchID)
			byNode[name]++
			if keysOf[name] == nil {
				keysOf[name] = map[string]bool{}
			}
			keysOf[name][b.ServiceID] = true
			return batchclaim.Result{Verdict: batchclaim.Done}, nil
		})
	}
	start := func(name string) *node.Node {
		cfg := node.Config{Claims: testClaims(name), Submitter: worker(name), Workers: 2 * keys, UnknownGrace: time.Second}
		sturdy(&cfg)
		n, err := node.New(dbtest.Open(t, newPool(t, url), ""), cfg)
		if err != nil {
			t.Fatal(err)
		}
		runCtx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- n.Run(runCtx) }()
		t.Cleanup(func() { cancel(); <-done })
		return n
	}
	a := start("a")
	testutil.WaitFor(t, 10*time.Second, "a holds every key and runs jobs", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return a.Engine().Stats().Held == keys && byNode["a"] > 0
	})
	b := start("b")
	testutil.WaitFor(t, 60*time.Second, "every job done", func() bool {
		var open int
		err := admin.QueryRow(ctx, `SELECT count(*) FROM batchclaim.batches WHERE state <> 'COMMITTED'`).Scan(&open)
		return err == nil && open == 0
	})
	mu.Lock()
	defer mu.Unlock()
	t.Logf("jobs run: a %d (%d keys), b %d (%d keys); b holds %d", byNode["a"], len(keysOf["a"]), byNode["b"], len(keysOf["b"]), b.Engine().Stats().Held)
	if len(overlap) > 0 {
		t.Fatalf("two jobs of one key ran at once: %v", overlap)
	}
	want := make([]string, perKey)
	for j := range want {
		want[j] = fmt.Sprintf("job-%04d", j)
	}
	for k := range keys {
		if key := fmt.Sprintf("key-%d", k); !slices.Equal(ran[key], want) {
			t.Errorf("%s ran %d jobs, not every job once in order", key, len(ran[key]))
		}
	}
	if len(keysOf["b"]) < keys/2-1 || byNode["b"] < keys*perKey/10 {
		t.Errorf("the instance that joined under load ran %d jobs of %d keys, want its share of the keys (about %d) before the backlog drained",
			byNode["b"], len(keysOf["b"]), keys/2)
	}
}
