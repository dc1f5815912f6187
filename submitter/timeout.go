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
	d, what := time.Duration(0), ""
	switch {
	case j.Batch.Timeout > 0:
		d, what = j.Batch.Timeout, "the job's own timeout"
	case p.timeouts != nil:
		d, what = p.timeouts.Timeout(j.Batch), "the timeout of kind "+strconv.Quote(j.Batch.Kind)
	}
	if at := start.Add(d); d > 0 && at.Before(limit) {
		return at, fmt.Errorf("%w after %s (%s)", ErrTimeout, d, what)
	}
	return limit, fmt.Errorf("%w after %s (the submit timeout)", ErrTimeout, p.cfg.Timeout)
}

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
