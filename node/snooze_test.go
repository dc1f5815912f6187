package node_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/node"
	"github.com/batchclaim/batchclaim/submitter"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
	"github.com/batchclaim/batchclaim/testkit/testutil"
)

// A job that snoozes runs again after the delay it asked for, by the database clock, without
// spending an attempt: a job allowed one attempt that snoozes twice still runs a third time
// and commits. Its attempt numbers never repeat, its key waits for it (the next job of the key
// starts only after it finished), and both ways of snoozing work: the error SnoozeFor(d) and
// the verdict Snooze.
func TestSnooze(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url := dbtest.NewDB(t)
	admin := newPool(t, url)
	const nap = 300 * time.Millisecond

	var mu sync.Mutex
	var seen [][2]int // (Attempts, AttemptBase) of each run of "napper"
	job := submitter.SubmitterFunc(func(ctx context.Context, b batchclaim.Batch) (batchclaim.Result, error) {
		if b.BatchID != "napper" {
			return batchclaim.Result{Verdict: batchclaim.Done}, nil
		}
		mu.Lock()
		seen = append(seen, [2]int{b.Attempts, b.AttemptBase})
		mu.Unlock()
		switch b.Attempts {
		case 0:
			return batchclaim.Result{}, batchclaim.SnoozeFor(nap)
		case 1:
			return batchclaim.Result{Verdict: batchclaim.Snooze, RetryAfter: nap, Detail: "not yet"}, nil
		}
		return batchclaim.Result{Verdict: batchclaim.Done}, nil
	})
	napper, err := node.Enqueue(ctx, admin, "k", "napper", nil, node.MaxAttempts(1))
	if err != nil {
		t.Fatal(err)
	}
	after, err := node.Enqueue(ctx, admin, "k", "after", nil)
	if err != nil {
		t.Fatal(err)
	}
	runJobs(t, url, "a", job, sturdy)
	defer func() { // before the cleanups, which run once the test's context has ended
		if t.Failed() {
			logRows(t, admin, `SELECT seq, batch_id, state, attempts, attempt_base, next_attempt_at, last_error FROM batchclaim.batches ORDER BY seq`)
			logRows(t, admin, `SELECT seq, started_at, finished_at, outcome, to_state, error FROM batchclaim.submission_attempts ORDER BY id`)
		}
	}()
	testutil.WaitFor(t, 30*time.Second, "both jobs finished", func() bool {
		s1, _ := jobState(t, admin, napper.Seq)
		s2, _ := jobState(t, admin, after.Seq)
		return batchclaim.State(s1).Terminal() && batchclaim.State(s2).Terminal()
	})
	if s, attempts := jobState(t, admin, napper.Seq); s != "COMMITTED" || attempts != 3 {
		t.Fatalf("napper: %s after %d attempts; want COMMITTED after 3 (two snoozes do not spend its one attempt)", s, attempts)
	}
	if s, _ := jobState(t, admin, after.Seq); s != "COMMITTED" {
		t.Fatalf("after: %s", s)
	}
	mu.Lock()
	got := append([][2]int(nil), seen...)
	mu.Unlock()
	if want := [][2]int{{0, 0}, {1, 1}, {2, 2}}; len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Errorf("napper's runs saw (Attempts, AttemptBase) %v; want %v", got, want)
	}
	// The snoozed attempts, each with the next attempt's start: not before the snooze ended.
	rows, err := admin.Query(ctx, `SELECT a.outcome, a.to_state, a.error,
			(SELECT min(n.at) FROM batchclaim.batch_history n WHERE n.seq = a.seq AND n.to_state = 'INFLIGHT' AND n.at > a.finished_at) - a.finished_at
		FROM batchclaim.submission_attempts a WHERE a.seq = $1 ORDER BY a.id`, napper.Seq)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for rows.Next() {
		var outcome, to string
		var detail *string
		var gap *time.Duration
		if err := rows.Scan(&outcome, &to, &detail, &gap); err != nil {
			t.Fatal(err)
		}
		n++
		if outcome != "snooze" || to != "DELAYED" || detail == nil {
			t.Errorf("snoozed attempt %d: outcome %s to %s (%v); want snooze to DELAYED with its detail", n, outcome, to, detail)
		}
		if gap == nil || *gap < nap {
			t.Errorf("snoozed attempt %d: the next attempt started %v after it; want at least %s", n, gap, nap)
		}
	}
	if err := rows.Err(); err != nil || n != 2 {
		t.Errorf("%d snoozed attempts recorded (%v); want 2", n, err)
	}
	if first, last := firstStart(t, admin, after.Seq), finishedAt(t, admin, napper.Seq); first.Before(last) {
		t.Errorf("after started at %s, before napper finished at %s: the key did not wait for the snoozed job", first, last)
	}
}
