package batchclaim

import (
	"fmt"
	"time"
)

// Batch is one unit of work of a service_id, in the per-service order seq.
type Batch struct {
	Seq       int64
	ServiceID string
	BatchID   string // the id it was enqueued with; empty for a job enqueued without one
	Payload   []byte
	Attempts  int // attempts made before this one; never counted afresh, not even by a Retry
	// AttemptBase is how many of Attempts were made before the job's last Retry (0: never
	// retried). The attempt limit and the backoff count the attempts after it.
	AttemptBase int
	// MaxAttempts is the job's own attempt limit, set when it was enqueued; 0 means the
	// runner's (node.Config.MaxAttempts).
	MaxAttempts int
	// Kind is the job's kind, set when it was enqueued (package jobs dispatches on it); empty
	// for a job stored without one (node.Enqueue, a ledger batch).
	Kind string
	// Timeout is the job's own timeout, set when it was enqueued: its context ends this long
	// after the attempt starts (at most the submit timeout, the claim engine's S). 0 means none
	// of its own.
	Timeout time.Duration
}

// Verdict is what the result of one submission means for its batch.
type Verdict int

const (
	Done     Verdict = iota + 1 // finished for good (a job runner's success): COMMITTED
	Accepted                    // accepted; the final outcome is polled for: PENDING
	Rejected                    // refused for good: INVALID, never resubmitted
	Retry                       // certainly not taken (back-pressure, refused connection): DELAYED
	Unknown                     // may or may not have taken effect: UNKNOWN, checked before any resubmission
	// Discard gives up on the job: DISCARDED, terminal, its service_id goes on with the next
	// batch; an operator may retry it. The submitter pool also gives this verdict in place of
	// Retry or Unknown once a job has made its last allowed attempt.
	Discard
	// Snooze runs the job again after Result.RetryAfter without counting the attempt towards
	// its limit or its backoff: DELAYED, due then by the database clock; its service_id waits
	// for it. A Submitter may also return the error SnoozeFor(d) (see SnoozeError).
	Snooze
)

func (v Verdict) String() string {
	switch v {
	case Done:
		return "done"
	case Accepted:
		return "accepted"
	case Rejected:
		return "rejected"
	case Retry:
		return "retry"
	case Unknown:
		return "unknown"
	case Discard:
		return "discard"
	case Snooze:
		return "snooze"
	}
	return fmt.Sprintf("verdict(%d)", int(v))
}

// Result is the outcome of one submission.
type Result struct {
	Verdict    Verdict
	HTTPStatus int           // 0 if no HTTP answer arrived
	RetryAfter time.Duration // the server's Retry-After, if any
	Detail     string        // error text or response excerpt
	Invalid    []byte        // JSON details of a rejection, if any
	// Output is a small JSON value the job recorded (at most MaxOutput bytes), stored with the
	// job whatever the verdict and shown on its page; nil records none and keeps any output an
	// earlier attempt recorded.
	Output []byte
}

// MaxOutput bounds a job's recorded output (Result.Output), in bytes of JSON.
const MaxOutput = 32 << 10

// MaxKindLen bounds a job's kind (Batch.Kind), in bytes.
const MaxKindLen = 128

// Outcome is one finished submission as the submitter hands it to the recorder.
type Outcome struct {
	Job     Job
	Result  Result
	Latency time.Duration
	// RetryIn is the delay before the batch may be tried again if the result leaves it DELAYED.
	RetryIn time.Duration
	// Chain asks the recorder to hand back the service_id's next batch, marked in flight in the
	// same write, when this outcome frees the service_id (COMMITTED, or INVALID without a halt)
	// and that batch is NEW: the worker that finished one batch then starts the next at once.
	Chain bool
	// ChainMaxBytes bounds the payload of the chained batch; a larger one is left for the
	// queuer. Negative means no bound.
	ChainMaxBytes int64
}
