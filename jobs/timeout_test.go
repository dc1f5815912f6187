package jobs_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/batchclaim/batchclaim/jobs"
	"github.com/batchclaim/batchclaim/node"
	"github.com/batchclaim/batchclaim/submitter"
)

// slowArgs is a job that waits for its context unless Quick; its kind's timeout is
// KindTimeout.
type slowArgs struct {
	KindTimeout time.Duration `json:"kind_timeout"`
	Quick       bool          `json:"quick"`
}

func (slowArgs) Kind() string { return "slow" }

type slowWorker struct{ causes chan error }

func (w slowWorker) Timeout(j *jobs.Job[slowArgs]) time.Duration { return j.Args.KindTimeout }

func (w slowWorker) Work(ctx context.Context, j *jobs.Job[slowArgs]) error {
	if j.Args.Quick {
		return nil
	}
	<-ctx.Done()
	w.causes <- context.Cause(ctx)
	return ctx.Err()
}

// A kind's timeout (its worker's Timeout) and a job's own (Timeout at Insert, which comes
// first) end the job's context; the attempt is a failure whose last error says it timed out
// and which timeout it was, and the job is retried by the attempt rules.
func TestTimeouts(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	w := slowWorker{causes: make(chan error, 10)}
	workers := jobs.NewWorkers()
	jobs.AddWorker[slowArgs](workers, w)
	// The node's submit timeout (MaxSubmission) is a minute: only the jobs' timeouts can end
	// them within the test.
	byKind, err := jobs.Insert(ctx, b.pool, "a", "", slowArgs{KindTimeout: 50 * time.Millisecond}, jobs.MaxAttempts(2))
	if err != nil {
		t.Fatal(err)
	}
	own, err := jobs.Insert(ctx, b.pool, "b", "", slowArgs{KindTimeout: time.Hour}, jobs.Timeout(80*time.Millisecond), jobs.MaxAttempts(1))
	if err != nil {
		t.Fatal(err)
	}
	quick, err := jobs.Insert(ctx, b.pool, "c", "", slowArgs{Quick: true}, jobs.Timeout(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	b.run("a", workers, func(c *node.Config) {
		c.Claims.Expiry1, c.Claims.Expiry2, c.Claims.MaxSubmission = 3*time.Second, 2*time.Minute, time.Minute
	})
	b.waitFinished(time.Minute)

	if j := b.job(byKind.Seq); j.State != "DISCARDED" || j.Attempts != 2 ||
		!strings.Contains(j.LastError, `timed out after 50ms (the timeout of kind "slow")`) || !strings.Contains(j.LastError, "discarded after 2 of 2 attempts") {
		t.Errorf("a job past its kind's timeout: %+v, want DISCARDED after 2 attempts that timed out", j)
	}
	if j := b.job(own.Seq); j.State != "DISCARDED" || j.Attempts != 1 || !strings.Contains(j.LastError, "timed out after 80ms (the job's own timeout)") {
		t.Errorf("a job past its own timeout: %+v, want DISCARDED after 1 attempt that timed out by its own timeout", j)
	}
	if j := b.job(quick.Seq); j.State != "COMMITTED" {
		t.Errorf("a job within its timeout: %+v, want COMMITTED", j)
	}
	for range 3 {
		if cause := <-w.causes; !errors.Is(cause, submitter.ErrTimeout) {
			t.Errorf("the job's context ended with cause %v, want submitter.ErrTimeout", cause)
		}
	}
}
