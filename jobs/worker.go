package jobs

import (
	"context"
	"time"

	"github.com/batchclaim/batchclaim"
)

// Args are a job's arguments. Kind names their type: it is stored with the job and picks the
// worker that runs it, so it must stay the same for the jobs already stored (rename a type,
// not its kind) and must not depend on the value (it is read from the zero value too). The
// arguments are stored as JSON (encoding/json), in the job's payload.
type Args interface {
	Kind() string
}

// Job is one job of kind T as its worker gets it: its decoded arguments and the stored job
// (batchclaim.Batch: Seq, ServiceID the key, BatchID the job's id (empty for one inserted
// without, which Seq names), Payload the arguments' JSON, Attempts made before this one,
// Kind, MaxAttempts, Timeout).
type Job[T Args] struct {
	batchclaim.Batch
	Args T
}

// Attempt is the number of this attempt, 1 for the first. Attempts go on counting across a
// retry (node.Retry).
func (j *Job[T]) Attempt() int { return j.Attempts + 1 }

// Worker runs the jobs of one kind. Work's error decides what becomes of the job:
//
//   - nil: COMMITTED (done);
//   - Discard(err): DISCARDED at once, whatever attempts remain;
//   - batchclaim.SnoozeFor(d): DELAYED for d without spending an attempt (River's JobSnooze);
//     the later jobs of its key wait for it;
//   - any other error: the attempt failed; the job is DELAYED and runs again after a backoff,
//     before any later job of its key, until its attempt limit makes it DISCARDED.
//
// ctx carries the claim the job runs under (batchclaim.ClaimFrom): a write the job makes to
// the same Postgres can be fenced on it (claims.Engine.WriteFenced). ctx ends when the claim
// is lost, the job's timeout passes (context.Cause: submitter.ErrTimeout) or the job is
// cancelled while it runs (node.Cancel; batchclaim.Cancelled(ctx)); Work should return then.
type Worker[T Args] interface {
	Work(ctx context.Context, job *Job[T]) error
}

// Timeouter is implemented by a Worker whose jobs have a timeout of their own (River's
// Worker.Timeout): each attempt's context ends that long after it starts, and the attempt is
// a failure whose last_error says it timed out. A job's own timeout (Timeout at Insert)
// comes first; the submit timeout (the claim engine's MaxSubmission) bounds both. Zero or
// negative means none of its own.
type Timeouter[T Args] interface {
	Timeout(job *Job[T]) time.Duration
}

// WorkFunc adapts a function to Worker.
func WorkFunc[T Args](f func(ctx context.Context, job *Job[T]) error) Worker[T] {
	return workFunc[T](f)
}

type workFunc[T Args] func(ctx context.Context, job *Job[T]) error

func (f workFunc[T]) Work(ctx context.Context, job *Job[T]) error { return f(ctx, job) }
