package node_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/migrations"
	"github.com/batchclaim/batchclaim/node"
	"github.com/batchclaim/batchclaim/submitter"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
	"github.com/batchclaim/batchclaim/testkit/testutil"
)

// The latest migration applied while two job runners work through a backlog on the schema
// before it, as the first step of a rolling upgrade does (docs/compatibility.md): every job
// runs once, in its key's order, never two of a key at once, and every row ends finished with
// unfinished and finished_at set as its state says. The runners are this build's, so they
// stand for the previous release only where the latest migration changed no statement.
func TestLatestMigrationAppliedUnderLoad(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url, latest := dbtest.NewDBBeforeLatest(t)
	admin := newPool(t, url)
	const keys, perKey = 20, 60
	jobs := make([]node.Job, 0, keys*perKey)
	for i := range perKey {
		for k := range keys {
			jobs = append(jobs, node.Job{ServiceID: fmt.Sprintf("key-%02d", k), BatchID: strconv.Itoa(i)})
		}
	}
	if _, err := node.EnqueueMany(ctx, admin, jobs); err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	inFlight := map[string]int{}
	ran := map[string][]string{} // key -> its jobs' ids, in the order they started
	var overlaps []string
	var done atomic.Int64
	job := submitter.SubmitterFunc(func(ctx context.Context, b batchclaim.Batch) (batchclaim.Result, error) {
		mu.Lock()
		if inFlight[b.ServiceID]++; inFlight[b.ServiceID] > 1 {
			overlaps = append(overlaps, b.ServiceID+"/"+b.BatchID)
		}
		ran[b.ServiceID] = append(ran[b.ServiceID], b.BatchID)
		mu.Unlock()
		time.Sleep(5 * time.Millisecond)
		mu.Lock()
		inFlight[b.ServiceID]--
		mu.Unlock()
		done.Add(1)
		return batchclaim.Result{Verdict: batchclaim.Done}, nil
	})
	runJobs(t, url, "a", job, nil)
	runJobs(t, url, "b", job, nil)

	testutil.WaitFor(t, 60*time.Second, "a tenth of the jobs done", func() bool { return done.Load() >= keys*perKey/10 })
	if err := migrations.Up(ctx, url); err != nil {
		t.Fatal(err)
	}
	if v, dirty, err := migrations.Version(ctx, url); err != nil || dirty || v != latest {
		t.Fatalf("version %d dirty %v (%v), want %d", v, dirty, err, latest)
	}
	if n := done.Load(); n >= keys*perKey {
		t.Fatalf("all %d jobs were done when the migration ended: it ran under no load", n)
	}
	testutil.WaitFor(t, 120*time.Second, "every job committed", func() bool {
		var open int
		_ = admin.QueryRow(ctx, `SELECT count(*) FROM batchclaim.batches WHERE state <> 'COMMITTED'`).Scan(&open)
		return open == 0
	})

	mu.Lock()
	defer mu.Unlock()
	if len(overlaps) > 0 {
		t.Errorf("jobs started while another of their key was in flight: %v", overlaps)
	}
	for k := range keys {
		key := fmt.Sprintf("key-%02d", k)
		got := ran[key]
		if len(got) != perKey {
			t.Errorf("%s ran %d jobs, want %d: %v", key, len(got), perKey, got)
			continue
		}
		for i, id := range got {
			if id != strconv.Itoa(i) {
				t.Errorf("%s ran its jobs in the order %v", key, got)
				break
			}
		}
	}
	var bad int
	if err := admin.QueryRow(ctx, `SELECT count(*) FROM batchclaim.batches WHERE unfinished OR finished_at IS NULL`).Scan(&bad); err != nil || bad != 0 {
		t.Errorf("%d committed jobs marked unfinished or without finished_at (%v)", bad, err)
	}
}
