package submitter

import (
	"context"

	"github.com/batchclaim/batchclaim"
)

// call is a running Submit call that a cancel can reach: the attempt it runs and the cancel
// of its context.
type call struct {
	attempt int // the job's attempt number (Batch.Attempts + 1)
	cancel  context.CancelCauseFunc
}

// cancellable returns a context under ctx that CancelJob can cancel while j's Submit call
// runs, and the function that forgets it once the call is over.
func (p *Pool) cancellable(ctx context.Context, j Job) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	seq := j.Batch.Seq
	p.mu.Lock()
	if p.calls == nil {
		p.calls = map[int64]call{}
	}
	p.calls[seq] = call{attempt: j.Batch.Attempts + 1, cancel: cancel}
	p.mu.Unlock()
	return ctx, func() {
		p.mu.Lock()
		delete(p.calls, seq)
		p.mu.Unlock()
		cancel(nil)
	}
}

// Calls returns the jobs whose Submit call runs now: seq -> attempt number (Batch.Attempts
// + 1), for a look at their cancel requests.
func (p *Pool) Calls() map[int64]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[int64]int, len(p.calls))
	for seq, c := range p.calls {
		out[seq] = c.attempt
	}
	return out
}

// CancelJob cancels the context of job seq's Submit call if it runs attempt now, with cause
// (which should wrap batchclaim.ErrCancelled: see batchclaim.CancelCause), and reports
// whether it did. The job's outcome is recorded as usual once the call returns; the outcome's
// write turns it into CANCELLED (see observer.Cancel).
func (p *Pool) CancelJob(seq int64, attempt int, cause error) bool {
	if cause == nil {
		cause = batchclaim.ErrCancelled
	}
	p.mu.Lock()
	c, ok := p.calls[seq]
	p.mu.Unlock()
	if !ok || c.attempt != attempt {
		return false
	}
	c.cancel(cause)
	return true
}
