package submitter

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/batchclaim/batchclaim"
)

// call is a job the Pool runs, from its Submit call to its outcome's write.
type call struct {
	job      Job                     // the job the Submit call runs (read by the middlewares' chain)
	attempt  int                     // the job's attempt number (Batch.Attempts + 1)
	deadline time.Time               // the Submit call's deadline (Overdue)
	stop     context.CancelFunc      // ends the call's context and the outcome's write, the worker's run of the service_id with them (Cancel)
	cancel   context.CancelCauseFunc // ends the call's context (CancelJob): the parent the worker's calls share, made again for the next
	returned atomic.Bool             // the Submit call returned (set under Pool.mu: CancelJob ends no later call)
}

// track registers c, job seq's run, with the Pool until untrack; a run the Pool's Cancel came
// before is stopped at once.
func (p *Pool) track(seq int64, c *call) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls[seq] = c
	if p.stopped.Err() != nil { // Cancel ran: it stopped the runs it found, not this one
		c.stop()
	}
}

// untrack forgets c, job seq's run, once it is over (and not a later run of seq's that took
// its place).
func (p *Pool) untrack(seq int64, c *call) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.calls[seq] == c {
		delete(p.calls, seq)
	}
}

// Calls returns the jobs whose Submit call runs now: seq -> attempt number (Batch.Attempts
// + 1), for a look at their cancel requests.
func (p *Pool) Calls() map[int64]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[int64]int, len(p.calls))
	for seq, c := range p.calls {
		if !c.returned.Load() {
			out[seq] = c.attempt
		}
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
	defer p.mu.Unlock()
	c, ok := p.calls[seq]
	if !ok || c.attempt != attempt || c.returned.Load() {
		return false
	}
	// Under p.mu, before returned is set: the context c.cancel ends is the parent of c's call
	// and of no later one (the worker makes it again for its next job once it ended).
	c.cancel(cause)
	return true
}

// returned marks c's Submit call returned: from then on CancelJob leaves it, and the context
// c.cancel ends, alone.
func (p *Pool) returned(c *call) {
	p.mu.Lock()
	c.returned.Store(true)
	p.mu.Unlock()
}
