package submitter

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/batchclaim/batchclaim"
)

// ErrTimeout is the cause (context.Cause) of a job's context that ended at its timeout. The
// attempt is then a failure whose detail (last_error) starts with the cause's text, which
// says which timeout it was: "timed out after 2s (the job's own timeout)".
var ErrTimeout = errors.New("timed out")

// Timeouter is implemented by a Submitter whose jobs have timeouts of their own by kind (a
// jobs.Workers asks the kind's worker). The Pool asks it before each job whose own timeout
// (Batch.Timeout, set at enqueue) is not set.
type Timeouter interface {
	// Timeout is b's timeout; zero or negative means none of its own (the submit timeout).
	Timeout(b batchclaim.Batch) time.Duration
}

// jobDeadline is when the context of j, started at start, ends, and the cause it ends with:
// after its own timeout, else its kind's, else the submit timeout; never after limit, the
// submit timeout's deadline.
func (p *Pool) jobDeadline(j Job, start, limit time.Time) (time.Time, error) {
	var c *timeoutCause
	switch {
	case j.Batch.Timeout > 0:
		c = &timeoutCause{after: j.Batch.Timeout, own: true}
	case p.timeouts != nil:
		c = &timeoutCause{after: p.timeouts.Timeout(j.Batch), byKind: true, kind: j.Batch.Kind}
	}
	if c != nil && c.after > 0 {
		if at := start.Add(c.after); at.Before(limit) {
			return at, c
		}
	}
	return limit, &timeoutCause{after: p.cfg.Timeout}
}

// timeoutCause is the cause of a job's context that ended at a timeout: ErrTimeout, saying
// which timeout it was. Its text is made only when it is read (an outcome's detail), not for
// every job.
type timeoutCause struct {
	after  time.Duration
	own    bool   // the job's own timeout
	byKind bool   // else the Submitter's (Timeouter) for the job's kind; else the submit timeout
	kind   string // the job's kind
}

func (e *timeoutCause) Error() string {
	which := "the submit timeout"
	switch {
	case e.own:
		which = "the job's own timeout"
	case e.byKind && e.kind != "":
		which = "the timeout of kind " + strconv.Quote(e.kind)
	case e.byKind:
		which = "the Submitter's timeout"
	}
	return fmt.Sprintf("%s after %s (%s)", ErrTimeout, e.after, which)
}

func (e *timeoutCause) Unwrap() error { return ErrTimeout }

// output is the output a job recorded, or nil (with a WARN line) when it is larger than
// batchclaim.MaxOutput or not JSON: the outcome is recorded without it.
func (p *Pool) output(log jobLogger, out []byte) []byte {
	switch {
	case out == nil:
		return nil
	case len(out) > batchclaim.MaxOutput:
		log.Warn("job output not recorded: larger than batchclaim.MaxOutput", "bytes", len(out), "max_bytes", batchclaim.MaxOutput)
		return nil
	case !json.Valid(out):
		log.Warn("job output not recorded: not JSON", "bytes", len(out))
		return nil
	}
	return out
}
