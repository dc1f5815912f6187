package jobs_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/jobs"
	"github.com/batchclaim/batchclaim/node"
	"github.com/batchclaim/batchclaim/submitter"
)

type receiptArgs struct {
	Order   string `json:"order"`
	FailOn1 bool   `json:"fail_on_1"`
	Huge    bool   `json:"huge"`
}

func (receiptArgs) Kind() string { return "receipt" }

// A job's recorded output is stored with it when its attempt ends, whatever the outcome; an
// attempt that records none keeps the earlier one; too large an output is refused with a
// clear error and nothing is recorded; a plain Submitter records output in its Result.
func TestRecordOutput(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	if err := jobs.RecordOutput(ctx, "x"); err == nil || !strings.Contains(err.Error(), "context of a job's Work") {
		t.Errorf("RecordOutput outside a job: %v", err)
	}
	tooLarge := make(chan error, 1)
	w := jobs.NewWorkers()
	jobs.AddWorker(w, jobs.WorkFunc(func(ctx context.Context, j *jobs.Job[receiptArgs]) error {
		switch {
		case j.Args.Huge:
			tooLarge <- jobs.RecordOutput(ctx, strings.Repeat("x", jobs.MaxOutput))
			return nil
		case j.Args.FailOn1 && j.Attempt() == 1:
			if err := jobs.RecordOutput(ctx, map[string]any{"step": "charged", "attempt": j.Attempt()}); err != nil {
				return err
			}
			return errors.New("mailer down")
		case j.Args.FailOn1:
			return nil // records nothing: the first attempt's output stays
		}
		if err := jobs.RecordOutput(ctx, "first"); err != nil {
			return err
		}
		return jobs.RecordOutput(ctx, map[string]string{"receipt": "r-" + j.Args.Order})
	}))
	w.AddPlain(submitter.SubmitterFunc(func(ctx context.Context, bt batchclaim.Batch) (batchclaim.Result, error) {
		return batchclaim.Result{Verdict: batchclaim.Done, Output: []byte(`{"plain":true}`)}, nil
	}))
	done, _ := jobs.Insert(ctx, b.pool, "a", "", receiptArgs{Order: "7"})
	retried, _ := jobs.Insert(ctx, b.pool, "b", "", receiptArgs{FailOn1: true})
	huge, _ := jobs.Insert(ctx, b.pool, "c", "", receiptArgs{Huge: true})
	plain, err := node.Enqueue(ctx, b.pool, "d", "plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	b.run("a", w, nil)
	b.waitFinished(time.Minute)

	for _, c := range []struct {
		seq  int64
		want string
	}{
		{done.Seq, `{"receipt": "r-7"}`},
		{retried.Seq, `{"step": "charged", "attempt": 1}`},
		{huge.Seq, ``},
		{plain.Seq, `{"plain": true}`},
	} {
		if j := b.job(c.seq); j.State != "COMMITTED" || j.Output != c.want {
			t.Errorf("job %d: %s with output %q, want COMMITTED with %q", c.seq, j.State, j.Output, c.want)
		}
	}
	if err := <-tooLarge; !errors.Is(err, jobs.ErrOutputTooLarge) || !strings.Contains(err.Error(), "at most 32768") {
		t.Errorf("RecordOutput of %d bytes: %v, want ErrOutputTooLarge saying the bound", jobs.MaxOutput+2, err)
	}
}
