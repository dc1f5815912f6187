package node_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
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

// What a River user expects of a job runner: a returned error is retried with backoff, a job
// that keeps failing is DISCARDED after its last attempt and its key goes on, a discarded job
// can be retried, a job can wait for a run-at time, and a job that has not run can be
// cancelled.
func TestJobSemantics(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url := dbtest.NewDB(t)
	admin := newPool(t, url)

	var fixed atomic.Bool // once set, the job "bad" succeeds
	job := submitter.SubmitterFunc(func(ctx context.Context, b batchclaim.Batch) (batchclaim.Result, error) {
		switch {
		case b.BatchID == "flaky" && b.Attempts < 2:
			return batchclaim.Result{}, errors.New("flaky: not yet")
		case b.BatchID == "bad" && !fixed.Load(), b.BatchID == "once":
			return batchclaim.Result{}, errors.New("bad: always fails")
		}
		return batchclaim.Result{Verdict: batchclaim.Done}, nil
	})
	logs := &testutil.SyncBuffer{}
	n, err := node.New(dbtest.Open(t, newPool(t, url), ""), node.Config{Claims: sturdyClaims("a"), Submitter: job, MaxAttempts: 3,
		BackoffBase: 10 * time.Millisecond, BackoffMax: 50 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- n.Run(runCtx) }()
	t.Cleanup(func() { stop(); <-done })
	t.Cleanup(func() {
		if t.Failed() {
			logRows(t, admin, `SELECT service_id, seq, batch_id, state, attempts, max_attempts, next_attempt_at, last_error FROM batchclaim.batches ORDER BY seq`)
			logRows(t, admin, `SELECT * FROM batchclaim.batch_history ORDER BY seq, at`)
		}
	})

	var dbNow time.Time
	if err := admin.QueryRow(ctx, `SELECT now()`).Scan(&dbNow); err != nil {
		t.Fatal(err)
	}
	runAt := dbNow.Add(1500 * time.Millisecond)
	seq := map[string]int64{}
	for _, e := range []struct {
		key, id string
		opts    []node.EnqueueOption
	}{
		{"flaky", "flaky", nil}, {"flaky", "after-flaky", nil},
		{"bad", "bad", nil}, {"bad", "after-bad", nil},
		{"once", "once", []node.EnqueueOption{node.MaxAttempts(1)}},
		{"later", "later", []node.EnqueueOption{node.RunAt(runAt)}}, {"later", "after-later", nil},
		{"cancel", "never", []node.EnqueueOption{node.RunAt(dbNow.Add(time.Hour))}}, {"cancel", "after-never", nil},
	} {
		st, err := node.Enqueue(ctx, admin, e.key, e.id, nil, e.opts...)
		if err != nil {
			t.Fatal(err)
		}
		seq[e.id] = st.Seq
	}
	if _, err := node.Enqueue(ctx, admin, "k", "zero", nil, node.MaxAttempts(0)); err == nil {
		t.Fatal("MaxAttempts(0) accepted; want an error")
	}

	// Cancel the job waiting for its run-at time an hour ahead: its key goes on.
	c, err := node.Cancel(ctx, admin, seq["never"], "not needed any more")
	if err != nil || c.From != batchclaim.StateNew || c.To != batchclaim.StateCancelled || c.ServiceID != "cancel" {
		t.Fatalf("Cancel = %+v, %v; want NEW -> CANCELLED of cancel", c, err)
	}
	if _, err := node.Cancel(ctx, admin, seq["never"], ""); !errors.Is(err, batchclaim.ErrStateChanged) {
		t.Fatalf("cancel of a CANCELLED job: %v; want ErrStateChanged", err)
	}
	if _, err := node.Cancel(ctx, admin, 1<<40, ""); !errors.Is(err, batchclaim.ErrNotFound) {
		t.Fatalf("cancel of no job: %v; want ErrNotFound", err)
	}

	state := func(id string) (st string, attempts int) {
		_ = admin.QueryRow(ctx, `SELECT state, attempts FROM batchclaim.batches WHERE seq = $1`, seq[id]).Scan(&st, &attempts)
		return st, attempts
	}
	testutil.WaitFor(t, 30*time.Second, "every job but the discarded ones and the cancelled one committed", func() bool {
		var open int
		err := admin.QueryRow(ctx, `SELECT count(*) FROM batchclaim.batches WHERE state <> 'COMMITTED' AND batch_id NOT IN ('bad', 'once', 'never')`).Scan(&open)
		b, _ := state("bad")
		o, _ := state("once")
		return err == nil && open == 0 && b == "DISCARDED" && o == "DISCARDED"
	})
	for id, want := range map[string]struct {
		state    string
		attempts int
	}{"flaky": {"COMMITTED", 3}, "bad": {"DISCARDED", 3}, "once": {"DISCARDED", 1}, "never": {"CANCELLED", 0},
		"after-flaky": {"COMMITTED", 1}, "after-bad": {"COMMITTED", 1}, "later": {"COMMITTED", 1}, "after-never": {"COMMITTED", 1}} {
		if st, att := state(id); st != want.state || att != want.attempts {
			t.Errorf("%s: %s after %d attempts, want %s after %d", id, st, att, want.state, want.attempts)
		}
	}
	// The errors were retried: DELAYED between the attempts, each delay recorded.
	var delayed int
	if err := admin.QueryRow(ctx, `SELECT count(*) FROM batchclaim.batch_history WHERE seq = $1 AND to_state = 'DELAYED'`, seq["flaky"]).Scan(&delayed); err != nil || delayed != 2 {
		t.Errorf("flaky: %d DELAYED transitions (%v), want 2", delayed, err)
	}
	var lastErr string
	if err := admin.QueryRow(ctx, `SELECT last_error FROM batchclaim.batches WHERE seq = $1`, seq["bad"]).Scan(&lastErr); err != nil ||
		!strings.Contains(lastErr, "discarded after 3 of 3 attempts: bad: always fails") {
		t.Errorf("bad's last error %q (%v); want it to say it was discarded after 3 of 3 attempts and why", lastErr, err)
	}
	if !strings.Contains(logs.String(), "batch DISCARDED") {
		t.Errorf("no WARN line for the discarded job; log:\n%s", logs.String())
	}
	// Order per key: the next job of a key started no earlier than the one before it finished
	// (the same statement may record the one and mark the next); the run-at job not before
	// its time (database clock).
	for _, p := range [][2]string{{"flaky", "after-flaky"}, {"bad", "after-bad"}, {"later", "after-later"}} {
		if first, next := finishedAt(t, admin, seq[p[0]]), firstStart(t, admin, seq[p[1]]); next.Before(first) {
			t.Errorf("%s started at %s, before %s finished at %s", p[1], next, p[0], first)
		}
	}
	if started := firstStart(t, admin, seq["later"]); started.Before(runAt) {
		t.Errorf("later started at %s, before its run-at time %s", started, runAt)
	}

	// Retry the discarded job once its cause is fixed: it runs again, its attempts counted on.
	fixed.Store(true)
	c, err = node.Retry(ctx, admin, seq["bad"])
	if err != nil || c.From != batchclaim.StateDiscarded || c.To != batchclaim.StateNew {
		t.Fatalf("Retry = %+v, %v; want DISCARDED -> NEW", c, err)
	}
	if _, err := node.Retry(ctx, admin, seq["after-bad"]); !errors.Is(err, batchclaim.ErrStateChanged) {
		t.Fatalf("retry of a COMMITTED job: %v; want ErrStateChanged", err)
	}
	c, err = node.Retry(ctx, admin, seq["never"])
	if err != nil || c.From != batchclaim.StateCancelled || c.To != batchclaim.StateNew {
		t.Fatalf("Retry of the cancelled job = %+v, %v; want CANCELLED -> NEW", c, err)
	}
	testutil.WaitFor(t, 30*time.Second, "the retried jobs committed", func() bool {
		b, _ := state("bad")
		nv, _ := state("never")
		return b == "COMMITTED" && nv == "COMMITTED"
	})
	if st, att := state("bad"); att != 4 {
		t.Errorf("bad after its retry: %s after %d attempts, want 4 (3 before the retry, 1 after)", st, att)
	}
	var retried int
	if err := admin.QueryRow(ctx, `SELECT count(*) FROM batchclaim.batch_history WHERE seq = $1 AND from_state = 'DISCARDED' AND to_state = 'NEW'`, seq["bad"]).Scan(&retried); err != nil || retried != 1 {
		t.Errorf("bad: %d DISCARDED -> NEW transitions (%v), want 1", retried, err)
	}
}

func firstStart(t *testing.T, pool *pgxpool.Pool, seq int64) time.Time {
	t.Helper()
	var at time.Time
	if err := pool.QueryRow(t.Context(), `SELECT min(at) FROM batchclaim.batch_history WHERE seq = $1 AND to_state = 'INFLIGHT'`, seq).Scan(&at); err != nil {
		t.Fatalf("first attempt of %d: %v", seq, err)
	}
	return at
}

func finishedAt(t *testing.T, pool *pgxpool.Pool, seq int64) time.Time {
	t.Helper()
	var at time.Time
	if err := pool.QueryRow(t.Context(), `SELECT max(at) FROM batchclaim.batch_history WHERE seq = $1 AND from_state = 'INFLIGHT'`, seq).Scan(&at); err != nil {
		t.Fatalf("last attempt of %d: %v", seq, err)
	}
	return at
}
