package batchclaim

import (
	"context"
	"errors"
	"fmt"
)

// ErrCancelled is the cause (context.Cause) of the context of a job that was cancelled while
// it ran (node.Cancel of an INFLIGHT job): the job should stop. Once it returns, the job
// becomes CANCELLED unless it returned Done (docs/jobs.md, "Cancel a running job").
var ErrCancelled = errors.New("job cancelled")

// CancelCause is the cause a running job's context is cancelled with when a cancel with
// reason reaches it: it wraps ErrCancelled and says the reason.
func CancelCause(reason string) error {
	if reason == "" {
		return ErrCancelled
	}
	return fmt.Errorf("%w: %s", ErrCancelled, reason)
}

// Cancelled reports whether ctx (a job's, or one derived from it) was cancelled because the
// job was: its cause wraps ErrCancelled.
func Cancelled(ctx context.Context) bool {
	return errors.Is(context.Cause(ctx), ErrCancelled)
}
