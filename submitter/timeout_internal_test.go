package submitter

import (
	"errors"
	"testing"
	"time"

	"github.com/batchclaim/batchclaim"
)

// timeoutsFunc is a Timeouter of a function.
type timeoutsFunc func(b batchclaim.Batch) time.Duration

func (f timeoutsFunc) Timeout(b batchclaim.Batch) time.Duration { return f(b) }

// A job's context ends at its own timeout, else at its kind's, and never after the submit
// timeout; the cause says which it was.
func TestJobDeadline(t *testing.T) {
	t.Parallel()
	start := time.Unix(1000, 0)
	limit := start.Add(time.Minute) // the submit timeout's deadline
	byKind := timeoutsFunc(func(b batchclaim.Batch) time.Duration {
		if b.Kind == "slow" {
			return 2 * time.Second
		}
		return 0
	})
	for _, tt := range []struct {
		name     string
		timeouts Timeouter
		batch    batchclaim.Batch
		after    time.Duration
		cause    string
	}{
		{"none", nil, batchclaim.Batch{}, time.Minute, "timed out after 1m0s (the submit timeout)"},
		{"its own", nil, batchclaim.Batch{Timeout: time.Second}, time.Second, "timed out after 1s (the job's own timeout)"},
		{"its own first", byKind, batchclaim.Batch{Kind: "slow", Timeout: time.Second}, time.Second, "timed out after 1s (the job's own timeout)"},
		{"its kind's", byKind, batchclaim.Batch{Kind: "slow"}, 2 * time.Second, `timed out after 2s (the timeout of kind "slow")`},
		{"a kind without one", byKind, batchclaim.Batch{Kind: "fast"}, time.Minute, "timed out after 1m0s (the submit timeout)"},
		{"a plain Submitter's", timeoutsFunc(func(batchclaim.Batch) time.Duration { return 3 * time.Second }), batchclaim.Batch{}, 3 * time.Second,
			"timed out after 3s (the Submitter's timeout)"},
		{"never past the submit timeout", byKind, batchclaim.Batch{Timeout: time.Hour}, time.Minute, "timed out after 1m0s (the submit timeout)"},
	} {
		p := &Pool{cfg: Config{Timeout: time.Minute}, timeouts: tt.timeouts}
		at, cause := p.jobDeadline(batchclaim.Job{Batch: tt.batch}, start, limit)
		if at.Sub(start) != tt.after || cause.Error() != tt.cause || !errors.Is(cause, ErrTimeout) {
			t.Errorf("%s: after %s with %q (is ErrTimeout: %v); want after %s with %q", tt.name, at.Sub(start), cause, errors.Is(cause, ErrTimeout), tt.after, tt.cause)
		}
	}
}
