package submitter

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/batchclaim/batchclaim"
)

func TestBackoffGrowsIsCappedAndHonoursRetryAfter(t *testing.T) {
	p := &Pool{cfg: Config{BackoffBase: 100 * time.Millisecond, BackoffMax: 2 * time.Second}}
	for attempts, want := range []time.Duration{100, 200, 400, 800, 1600} {
		want *= time.Millisecond
		if d := p.backoff(attempts, 0); d < want/2 || d > want*3/2 {
			t.Errorf("attempt %d: %s, want %s +-50%%", attempts, d, want)
		}
	}
	for _, attempts := range []int{10, 100} {
		if d := p.backoff(attempts, 0); d < time.Second || d > 3*time.Second {
			t.Errorf("attempt %d: %s, want about the 2s cap (+-50%%)", attempts, d)
		}
	}
	if d := p.backoff(0, 5*time.Second); d != 5*time.Second {
		t.Errorf("Retry-After 5s gave %s", d)
	}
}

// An error is Unknown, or Retry for a job runner; the last allowed attempt of a job that keeps
// failing is Discard, by the job's own limit first; other verdicts are kept.
func TestVerdict(t *testing.T) {
	errBoom := errors.New("boom")
	job := func(attempts, max int) Job {
		return Job{Batch: batchclaim.Batch{Attempts: attempts, MaxAttempts: max}}
	}
	for _, tt := range []struct {
		name  string
		cfg   Config
		job   Job
		res   batchclaim.Result
		err   error
		want  batchclaim.Verdict
		inMsg string
	}{
		{"error is unknown", Config{}, job(0, 0), batchclaim.Result{}, errBoom, batchclaim.Unknown, "boom"},
		{"error is retry for a job runner", Config{RetryErrors: true}, job(0, 0), batchclaim.Result{}, errBoom, batchclaim.Retry, "boom"},
		{"no verdict is unknown", Config{}, job(0, 0), batchclaim.Result{}, nil, batchclaim.Unknown, ""},
		{"no limit", Config{RetryErrors: true}, job(1000, 0), batchclaim.Result{}, errBoom, batchclaim.Retry, "boom"},
		{"below the limit", Config{RetryErrors: true, MaxAttempts: 3}, job(1, 0), batchclaim.Result{}, errBoom, batchclaim.Retry, "boom"},
		{"last attempt", Config{RetryErrors: true, MaxAttempts: 3}, job(2, 0), batchclaim.Result{}, errBoom, batchclaim.Discard, "after 3 of 3 attempts: boom"},
		{"unknown at the last attempt", Config{MaxAttempts: 3}, job(2, 0), batchclaim.Result{Verdict: batchclaim.Unknown}, nil, batchclaim.Discard, "after 3 of 3"},
		{"the job's own limit first", Config{RetryErrors: true, MaxAttempts: 3}, job(0, 1), batchclaim.Result{}, errBoom, batchclaim.Discard, "after 1 of 1"},
		{"the job's own limit may be higher", Config{RetryErrors: true, MaxAttempts: 3}, job(4, 10), batchclaim.Result{}, errBoom, batchclaim.Retry, "boom"},
		{"done stays done", Config{MaxAttempts: 1}, job(5, 0), batchclaim.Result{Verdict: batchclaim.Done}, nil, batchclaim.Done, ""},
		{"rejected stays rejected", Config{MaxAttempts: 1}, job(5, 0), batchclaim.Result{Verdict: batchclaim.Rejected}, nil, batchclaim.Rejected, ""},
		{"a submitter may discard", Config{}, job(0, 0), batchclaim.Result{Verdict: batchclaim.Discard, Detail: "no such account"}, nil, batchclaim.Discard, "no such account"},
	} {
		p := &Pool{cfg: tt.cfg}
		got := p.verdict(context.Background(), tt.job, tt.res, tt.err)
		if got.Verdict != tt.want || !strings.Contains(got.Detail, tt.inMsg) {
			t.Errorf("%s: %s %q, want %s containing %q", tt.name, got.Verdict, got.Detail, tt.want, tt.inMsg)
		}
	}
	// An error after the job's context ended at its timeout says so.
	p := &Pool{cfg: Config{RetryErrors: true}}
	ctx, cancel := context.WithDeadlineCause(context.Background(), time.Now(), fmt.Errorf("%w after 2s (the job's own timeout)", ErrTimeout))
	defer cancel()
	<-ctx.Done()
	if got := p.verdict(ctx, job(0, 0), batchclaim.Result{}, ctx.Err()); got.Verdict != batchclaim.Retry ||
		got.Detail != "timed out after 2s (the job's own timeout): context deadline exceeded" {
		t.Errorf("an error at the timeout: %s %q", got.Verdict, got.Detail)
	}
}
