package jobs_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/ingest"
	"github.com/batchclaim/batchclaim/jobs"
	"github.com/batchclaim/batchclaim/node"
	"github.com/batchclaim/batchclaim/submitter"
)

type sendEmail struct {
	To      string `json:"to"`
	Subject string `json:"subject"`
}

func (sendEmail) Kind() string { return "send_email" }

type chargeCard struct {
	Cents int `json:"cents"`
}

func (chargeCard) Kind() string { return "charge_card" }

type resizeImage struct{}

func (resizeImage) Kind() string { return "resize_image" }

// log is what the workers of a test saw, in order.
type log struct {
	mu    sync.Mutex
	lines []string
}

func (l *log) add(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
}

func (l *log) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// Several kinds on one node, beside plain jobs: each job goes to the worker of its kind with
// its arguments decoded, in its key's order; a job inserted in a transaction that rolls back
// never runs; the kind is stored with the job.
func TestKindsRunWithTheirWorkers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	var seen log
	w := jobs.NewWorkers()
	jobs.AddWorker(w, jobs.WorkFunc(func(ctx context.Context, j *jobs.Job[sendEmail]) error {
		seen.add("%s email to %s: %s (attempt %d)", j.ServiceID, j.Args.To, j.Args.Subject, j.Attempt())
		return nil
	}))
	jobs.AddWorker(w, jobs.WorkFunc(func(ctx context.Context, j *jobs.Job[chargeCard]) error {
		seen.add("%s charge %d", j.ServiceID, j.Args.Cents)
		return nil
	}))
	w.AddPlain(submitter.SubmitterFunc(func(ctx context.Context, bt batchclaim.Batch) (batchclaim.Result, error) {
		seen.add("%s plain %s", bt.ServiceID, bt.Payload)
		return batchclaim.Result{Verdict: batchclaim.Done}, nil
	}))
	if got := fmt.Sprint(w.Kinds()); got != "[charge_card send_email]" {
		t.Errorf("Kinds() = %s", got)
	}

	charge, err := jobs.Insert(ctx, b.pool, "order-1", "charge", chargeCard{Cents: 1250})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := node.Enqueue(ctx, b.pool, "order-1", "audit", []byte("plain bytes")); err != nil {
		t.Fatal(err)
	}
	// In the application's transaction: the job is stored with the application's write, or
	// neither is.
	if _, err := b.pool.Exec(ctx, `CREATE TABLE orders (id text PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	for _, commit := range []bool{false, true} {
		tx, err := b.pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO orders VALUES ('order-1')`); err != nil {
			t.Fatal(err)
		}
		if _, err := jobs.Insert(ctx, tx, "order-1", "", sendEmail{To: "ann@example.com", Subject: fmt.Sprint("committed ", commit)}); err != nil {
			t.Fatal(err)
		}
		if commit {
			err = tx.Commit(ctx)
		} else {
			err = tx.Rollback(ctx)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	again, err := jobs.Insert(ctx, b.pool, "order-1", "charge", chargeCard{Cents: 99})
	if err != nil || again.New || again.Seq != charge.Seq {
		t.Fatalf("the same id again: %+v, %v; want the first job (seq %d), not new", again, err, charge.Seq)
	}
	if _, err := jobs.Insert(ctx, b.pool, "order-2", "", chargeCard{Cents: 7}); err != nil {
		t.Fatal(err)
	}

	b.run("a", w, nil)
	b.waitFinished(time.Minute)
	var order1 []string
	for _, l := range strings.Split(seen.String(), "\n") {
		if strings.HasPrefix(l, "order-1 ") {
			order1 = append(order1, l)
		}
	}
	want := []string{"order-1 charge 1250", "order-1 plain plain bytes", "order-1 email to ann@example.com: committed true (attempt 1)"}
	if fmt.Sprint(order1) != fmt.Sprint(want) {
		t.Errorf("order-1 ran\n%s\nwant\n%s", strings.Join(order1, "\n"), strings.Join(want, "\n"))
	}
	if !strings.Contains(seen.String(), "order-2 charge 7") {
		t.Errorf("order-2's job did not run:\n%s", seen.String())
	}
	if j := b.job(charge.Seq); j.State != "COMMITTED" || j.Kind != "charge_card" {
		t.Errorf("charge job: %+v, want COMMITTED with kind charge_card", j)
	}
	rows, err := b.pool.Query(ctx, `SELECT batch_id, COALESCE(kind, '-') FROM batchclaim.batches WHERE service_id = 'order-1' ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for rows.Next() {
		var id, kind string
		if err := rows.Scan(&id, &kind); err != nil {
			t.Fatal(err)
		}
		kinds = append(kinds, kind)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(kinds); got != "[charge_card - send_email]" {
		t.Errorf("stored kinds of order-1: %s", got)
	}
}

// A job whose kind no worker knows, a job without a kind on Workers without AddPlain, and a
// job whose arguments do not decode are DISCARDED at their first attempt, their last error
// naming the kind and the kinds registered; their key goes on with its next job.
func TestUnknownKindIsDiscardedAtOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	w := jobs.NewWorkers()
	var ran log
	jobs.AddWorker(w, jobs.WorkFunc(func(ctx context.Context, j *jobs.Job[sendEmail]) error {
		ran.add("email %s", j.Args.To)
		return nil
	}))
	jobs.AddWorker(w, jobs.WorkFunc(func(ctx context.Context, j *jobs.Job[chargeCard]) error {
		ran.add("charge %d", j.Args.Cents)
		return nil
	}))
	unknown, err := jobs.Insert(ctx, b.pool, "k", "resize", resizeImage{})
	if err != nil {
		t.Fatal(err)
	}
	plain, err := node.Enqueue(ctx, b.pool, "k", "plain", []byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	garbled, err := node.Enqueue(ctx, b.pool, "k", "garbled", []byte("not json"), ingest.Kind("send_email"))
	if err != nil {
		t.Fatal(err)
	}
	next, err := jobs.Insert(ctx, b.pool, "k", "next", sendEmail{To: "bo@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	b.run("a", w, func(c *node.Config) { c.MaxAttempts = 25 })
	b.waitFinished(time.Minute)

	for _, c := range []struct {
		seq  int64
		want []string
	}{
		{unknown.Seq, []string{`unknown job kind "resize_image"`, "kinds registered: charge_card, send_email"}},
		{plain.Seq, []string{"job has no kind", "kinds registered: charge_card, send_email"}},
		{garbled.Seq, []string{`decode the arguments of kind "send_email"`}},
	} {
		j := b.job(c.seq)
		if j.State != "DISCARDED" || j.Attempts != 1 {
			t.Errorf("job %d: %s after %d attempts, want DISCARDED after 1", c.seq, j.State, j.Attempts)
		}
		for _, w := range c.want {
			if !strings.Contains(j.LastError, w) {
				t.Errorf("job %d's last error %q does not say %q", c.seq, j.LastError, w)
			}
		}
	}
	if j := b.job(next.Seq); j.State != "COMMITTED" {
		t.Errorf("the key's next job: %+v, want COMMITTED", j)
	}
	if ran.String() != "email bo@example.com" {
		t.Errorf("workers ran %q, want the next job's only", ran.String())
	}
}

// Work's answers: nil is COMMITTED, Discard DISCARDED at once, an error a failed attempt
// that is retried, a panic a failed attempt too.
func TestWorkErrors(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	w := jobs.NewWorkers()
	jobs.AddWorker(w, jobs.WorkFunc(func(ctx context.Context, j *jobs.Job[chargeCard]) error {
		switch {
		case j.Args.Cents < 0:
			return jobs.Discard(fmt.Errorf("negative amount %d", j.Args.Cents))
		case j.Args.Cents == 0 && j.Attempt() == 1:
			panic("zero amount")
		case j.Args.Cents == 1 && j.Attempt() < 3:
			return errors.New("card network down")
		}
		return nil
	}))
	neg, _ := jobs.Insert(ctx, b.pool, "a", "", chargeCard{Cents: -5})
	zero, _ := jobs.Insert(ctx, b.pool, "b", "", chargeCard{Cents: 0})
	flaky, err := jobs.Insert(ctx, b.pool, "c", "", chargeCard{Cents: 1})
	if err != nil {
		t.Fatal(err)
	}
	b.run("a", w, nil)
	b.waitFinished(time.Minute)
	if j := b.job(neg.Seq); j.State != "DISCARDED" || j.Attempts != 1 || j.LastError != "negative amount -5" {
		t.Errorf("Discard: %+v, want DISCARDED after 1 attempt with the error", j)
	}
	if j := b.job(zero.Seq); j.State != "COMMITTED" || j.Attempts != 2 {
		t.Errorf("a panic: %+v, want COMMITTED at attempt 2", j)
	}
	var errs []string
	rows, err := b.pool.Query(ctx, `SELECT COALESCE(error, '') FROM batchclaim.submission_attempts WHERE seq = ANY($1) ORDER BY id`, []int64{zero.Seq, flaky.Seq})
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var e string
		if err := rows.Scan(&e); err != nil {
			t.Fatal(err)
		}
		errs = append(errs, e)
	}
	if got := strings.Join(errs, "|"); !strings.Contains(got, `job of kind "charge_card" panicked: zero amount`) || strings.Count(got, "card network down") != 2 {
		t.Errorf("failed attempts' errors: %s", got)
	}
	if j := b.job(flaky.Seq); j.State != "COMMITTED" || j.Attempts != 3 {
		t.Errorf("an error twice: %+v, want COMMITTED at attempt 3", j)
	}
}

func TestAddWorkerRefusesADuplicateKind(t *testing.T) {
	t.Parallel()
	w := jobs.NewWorkers()
	work := jobs.WorkFunc(func(context.Context, *jobs.Job[sendEmail]) error { return nil })
	if err := jobs.AddWorkerSafely(w, work); err != nil {
		t.Fatal(err)
	}
	err := jobs.AddWorkerSafely(w, work)
	if err == nil || !strings.Contains(err.Error(), `"send_email" is registered already`) {
		t.Errorf("a second worker for send_email: %v", err)
	}
	defer func() {
		if recover() == nil {
			t.Error("AddWorker did not panic on a duplicate kind")
		}
	}()
	jobs.AddWorker(w, work)
}

// InsertMany stores typed jobs of several keys and kinds in one call, with ids and without:
// each key's jobs run in the order given, a repeated id is reported and skipped, and a bad
// job stores nothing of the call.
func TestInsertMany(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	if _, err := jobs.InsertMany(ctx, b.pool, []jobs.InsertManyParams{
		{Key: "order-1", Args: chargeCard{Cents: 1}}, {Key: "order-1", Args: nil},
	}); err == nil || !strings.Contains(err.Error(), "job 1") {
		t.Fatalf("a job without arguments: %v, want an error naming job 1", err)
	}
	stored, err := jobs.InsertMany(ctx, b.pool, []jobs.InsertManyParams{
		{Key: "order-1", ID: "charge", Args: chargeCard{Cents: 1250}},
		{Key: "order-2", Args: chargeCard{Cents: 7}},
		{Key: "order-1", Args: sendEmail{To: "ann@example.com", Subject: "paid"}, Options: []jobs.InsertOption{jobs.MaxAttempts(2)}},
		{Key: "order-1", ID: "charge", Args: chargeCard{Cents: 99}}, // a repeat of the first
		{Key: "order-2", Args: sendEmail{To: "bob@example.com", Subject: "paid"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !stored[0].New || stored[3].New || stored[3].Seq != stored[0].Seq || stored[1].BatchID != "" || !stored[4].New {
		t.Fatalf("stored %+v", stored)
	}
	var n int
	if err := b.pool.QueryRow(ctx, `SELECT count(*) FROM batchclaim.batches`).Scan(&n); err != nil || n != 4 {
		t.Fatalf("%d jobs stored (%v), want 4: the failed call stored nothing, the repeat was skipped", n, err)
	}
	var seen log
	w := jobs.NewWorkers()
	jobs.AddWorker(w, jobs.WorkFunc(func(ctx context.Context, j *jobs.Job[sendEmail]) error {
		seen.add("%s email to %s (max attempts %d)", j.ServiceID, j.Args.To, j.MaxAttempts)
		return nil
	}))
	jobs.AddWorker(w, jobs.WorkFunc(func(ctx context.Context, j *jobs.Job[chargeCard]) error {
		seen.add("%s charge %d", j.ServiceID, j.Args.Cents)
		return nil
	}))
	b.run("a", w, nil)
	b.waitFinished(time.Minute)
	byKey := map[string][]string{}
	for _, l := range strings.Split(seen.String(), "\n") {
		key, _, _ := strings.Cut(l, " ")
		byKey[key] = append(byKey[key], l)
	}
	want := map[string][]string{
		"order-1": {"order-1 charge 1250", "order-1 email to ann@example.com (max attempts 2)"},
		"order-2": {"order-2 charge 7", "order-2 email to bob@example.com (max attempts 0)"},
	}
	if fmt.Sprint(byKey) != fmt.Sprint(want) {
		t.Errorf("ran %v, want %v", byKey, want)
	}
}
