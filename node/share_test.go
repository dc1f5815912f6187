package node_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/ingest"
	"github.com/batchclaim/batchclaim/node"
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
	log := newKeyLog()
	byNode := map[string]int{}             // node -> jobs it ran (under log.mu)
	keysOf := map[string]map[string]bool{} // node -> keys it ran jobs of
	start := func(name string) *node.Node {
		job := log.submitter(2*time.Millisecond, func(b batchclaim.Batch) batchclaim.Result {
			byNode[name]++
			if keysOf[name] == nil {
				keysOf[name] = map[string]bool{}
			}
			keysOf[name][b.ServiceID] = true
			return batchclaim.Result{Verdict: batchclaim.Done}
		})
		return runJobs(t, url, name, job, func(c *node.Config) {
			sturdy(c)
			c.Workers, c.UnknownGrace = 2*keys, time.Second
		})
	}
	a := start("a")
	testutil.WaitFor(t, 10*time.Second, "a holds every key and runs jobs", func() bool {
		log.mu.Lock()
		defer log.mu.Unlock()
		return a.Engine().Stats().Held == keys && byNode["a"] > 0
	})
	b := start("b")
	testutil.WaitFor(t, 60*time.Second, "every job done", func() bool {
		var open int
		err := admin.QueryRow(ctx, `SELECT count(*) FROM batchclaim.batches WHERE state <> 'COMMITTED'`).Scan(&open)
		return err == nil && open == 0
	})
	log.mu.Lock()
	defer log.mu.Unlock()
	t.Logf("jobs run: a %d (%d keys), b %d (%d keys); b holds %d", byNode["a"], len(keysOf["a"]), byNode["b"], len(keysOf["b"]), b.Engine().Stats().Held)
	if len(log.overlap) > 0 {
		t.Fatalf("two jobs of one key ran at once: %v", log.overlap)
	}
	want := make([]string, perKey)
	for j := range want {
		want[j] = fmt.Sprintf("job-%04d", j)
	}
	for k := range keys {
		if key := fmt.Sprintf("key-%d", k); !slices.Equal(log.ran[key], want) {
			t.Errorf("%s ran %d jobs, not every job once in order", key, len(log.ran[key]))
		}
	}
	if len(keysOf["b"]) < keys/2-1 || byNode["b"] < keys*perKey/10 {
		t.Errorf("the instance that joined under load ran %d jobs of %d keys, want its share of the keys (about %d) before the backlog drained",
			byNode["b"], len(keysOf["b"]), keys/2)
	}
}
