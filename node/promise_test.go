package node_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/node"
	"github.com/batchclaim/batchclaim/submitter"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
	"github.com/batchclaim/batchclaim/testkit/testutil"
)

// The key's promise under operators' writes (docs/claims.md, "The key's promise"): at most one
// job of a key in flight whatever wrote it, a revived job is run, an attempt number is never
// used twice for one job.

// runJobs starts a job-runner node named name on its own pool until the test ends. Its
// MaxAttempts is 5 and its backoff short; tweak changes the rest.
func runJobs(t *testing.T, url, name string, job submitter.Submitter, tweak func(*node.Config)) *node.Node {
	t.Helper()
	n, _ := runJobsOn(t, newPool(t, url), name, job, tweak)
	return n
}

// runJobsOn is runJobs on the given pool. stop ends the node's Run and returns its error; the
// test's cleanup calls it too.
func runJobsOn(t *testing.T, pool *pgxpool.Pool, name string, job submitter.Submitter, tweak func(*node.Config)) (n *node.Node, stop func() error) {
	t.Helper()
	cfg := node.Config{Claims: testClaims(name), Submitter: job, MaxAttempts: 5,
		BackoffBase: 10 * time.Millisecond, BackoffMax: 50 * time.Millisecond}
	if tweak != nil {
		tweak(&cfg)
	}
	n, err := node.New(dbtest.Open(t, pool, ""), cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx) }()
	var once sync.Once
	var runErr error
	stop = func() error {
		once.Do(func() {
			cancel()
			if runErr = <-done; errors.Is(runErr, context.Canceled) {
				runErr = nil
			}
		})
		return runErr
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("%s stopped with %v", name, err)
		}
	})
	return n, stop
}

func jobState(t *testing.T, pool *pgxpool.Pool, seq int64) (state string, attempts int) {
	t.Helper()
	if err := pool.QueryRow(t.Context(), `SELECT state, attempts FROM batchclaim.batches WHERE seq = $1`, seq).Scan(&state, &attempts); err != nil {
		t.Fatalf("job %d: %v", seq, err)
	}
	return state, attempts
}

// A job retried while a later job of its key is in flight waits for that job: the key stays
// busy (its owner keeps it past expiry-1, a joining peer cannot take it, it is no surplus to
// release), and the retried job starts only after the job in flight finished. Its attempts go
// on counting, and its attempt limit counts from the retry.
func TestRetryWaitsForTheJobInFlight(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url := dbtest.NewDB(t)
	admin := newPool(t, url)

	var fixed atomic.Bool
	secondStarted, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	var mu sync.Mutex
	seen := map[string][][2]int{} // batch id -> (Attempts, AttemptBase) per run
	job := submitter.SubmitterFunc(func(ctx context.Context, b batchclaim.Batch) (batchclaim.Result, error) {
		mu.Lock()
		seen[b.BatchID] = append(seen[b.BatchID], [2]int{b.Attempts, b.AttemptBase})
		mu.Unlock()
		switch b.BatchID {
		case "first":
			if !fixed.Load() {
				return batchclaim.Result{}, errors.New("first: not yet")
			}
		case "second":
			once.Do(func() { close(secondStarted) })
			select {
			case <-release:
			case <-ctx.Done():
				return batchclaim.Result{}, ctx.Err()
			}
		}
		return batchclaim.Result{Verdict: batchclaim.Done}, nil
	})
	runJobs(t, url, "a", job, sturdy)
	t.Cleanup(func() {
		if t.Failed() {
			logRows(t, admin, `SELECT seq, batch_id, state, pos, attempts, attempt_base, claimant FROM batchclaim.batches ORDER BY seq`)
			logRows(t, admin, `SELECT * FROM batchclaim.batch_history ORDER BY at`)
		}
	})

	first, err := node.Enqueue(ctx, admin, "k", "first", nil, node.MaxAttempts(2))
	if err != nil {
		t.Fatal(err)
	}
	second, err := node.Enqueue(ctx, admin, "k", "second", nil)
	if err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 30*time.Second, "first DISCARDED", func() bool { s, _ := jobState(t, admin, first.Seq); return s == "DISCARDED" })
	select {
	case <-secondStarted:
	case <-time.After(30 * time.Second):
		t.Fatal("second never started")
	}

	fixed.Store(true)
	c, err := node.Retry(ctx, admin, first.Seq)
	if err != nil || c.From != batchclaim.StateDiscarded || c.To != batchclaim.StateNew {
		t.Fatalf("Retry = %+v, %v; want DISCARDED -> NEW", c, err)
	}
	// The claim is busy: its owner has a job in flight, whatever the retry did.
	var busy bool
	if err := admin.QueryRow(ctx, `SELECT busy FROM batchclaim.service_id_claims_effective WHERE service_id = 'k'`).Scan(&busy); err != nil || !busy {
		t.Fatalf("claim of k busy = %v (%v) while second is in flight after the retry; want true", busy, err)
	}
	// A peer joins and runs claim cycles; the retried job stays NEW while second runs.
	runJobs(t, url, "b", job, sturdy)
	var beats int
	testutil.WaitFor(t, 20*time.Second, "b renewed its lease a few times", func() bool {
		_ = admin.QueryRow(ctx, `SELECT count(*) FROM batchclaim.instances WHERE name = 'b' AND heartbeat_at > started_at + interval '500 milliseconds'`).Scan(&beats)
		return beats == 1
	})
	if s, _ := jobState(t, admin, first.Seq); s != "NEW" {
		t.Fatalf("first is %s while second is still in flight; want NEW (waiting)", s)
	}
	close(release)
	testutil.WaitFor(t, 30*time.Second, "both committed", func() bool {
		a, _ := jobState(t, admin, first.Seq)
		b, _ := jobState(t, admin, second.Seq)
		return a == "COMMITTED" && b == "COMMITTED"
	})
	var rerun, done time.Time
	if err := admin.QueryRow(ctx, `SELECT max(at) FROM batchclaim.batch_history WHERE seq = $1 AND to_state = 'INFLIGHT'`, first.Seq).Scan(&rerun); err != nil {
		t.Fatal(err)
	}
	if done = finishedAt(t, admin, second.Seq); rerun.Before(done) {
		t.Errorf("the retried first started at %s, before second finished at %s", rerun, done)
	}
	// Attempts: two before the retry (its limit), one after it, numbered 3; none repeated.
	if _, att := jobState(t, admin, first.Seq); att != 3 {
		t.Errorf("first made %d attempts, want 3", att)
	}
	mu.Lock()
	defer mu.Unlock()
	want := [][2]int{{0, 0}, {1, 0}, {2, 2}}
	if got := seen["first"]; len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Errorf("first's runs saw (Attempts, AttemptBase) %v; want %v", got, want)
	}
}

// A job retried after its key's claim row was dropped as idle is run: the retry creates the
// row again and wakes the claim cycles, as an enqueue does.
func TestRetryAfterTheKeyWasDroppedAsIdle(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url := dbtest.NewDB(t)
	admin := newPool(t, url)
	var fixed atomic.Bool
	job := submitter.SubmitterFunc(func(ctx context.Context, b batchclaim.Batch) (batchclaim.Result, error) {
		if !fixed.Load() {
			return batchclaim.Result{}, errors.New("not yet")
		}
		return batchclaim.Result{Verdict: batchclaim.Done}, nil
	})
	runJobs(t, url, "a", job, func(c *node.Config) {
		c.Claims.DropIdleAfter = 200 * time.Millisecond
	})
	st, err := node.Enqueue(ctx, admin, "k", "only", nil, node.MaxAttempts(1))
	if err != nil {
		t.Fatal(err)
	}
	rows := func() (n int) {
		_ = admin.QueryRow(ctx, `SELECT count(*) FROM batchclaim.service_id_claims WHERE service_id = 'k'`).Scan(&n)
		return n
	}
	testutil.WaitFor(t, 30*time.Second, "the job DISCARDED and k's claim row dropped as idle", func() bool {
		s, _ := jobState(t, admin, st.Seq)
		return s == "DISCARDED" && rows() == 0
	})
	fixed.Store(true)
	if c, err := node.Retry(ctx, admin, st.Seq); err != nil || c.To != batchclaim.StateNew {
		t.Fatalf("Retry = %+v, %v; want -> NEW", c, err)
	}
	if rows() != 1 {
		t.Fatal("the retry did not create k's claim row again")
	}
	testutil.WaitFor(t, 10*time.Second, "the retried job committed", func() bool {
		s, _ := jobState(t, admin, st.Seq)
		return s == "COMMITTED"
	})
}
