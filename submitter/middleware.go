package submitter

import (
	"context"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/internal/tracing"
)

// Middleware wraps every job a Pool runs: what it does before it calls next runs before the
// job, what it does after runs after it, and it sees the job's error. The job j carries the
// claim it runs under (j.Claim: the key and the epoch), its attempt (j.Batch.Attempts+1) and
// why it runs (j.Reason); ctx carries the claim too (batchclaim.ClaimFrom) and ends at the
// job's timeout. The ctx a middleware passes to next is the one the Submitter gets, so a
// middleware may add values to it (a span, a logger).
//
// next runs the rest of the chain and the Submitter. The Result it returns is the one the
// job's outcome is recorded from: a Submitter's error is already in it (Verdict Retry in a
// job runner, Unknown in a ledger pipeline; Detail the error's text, which says so when the
// attempt timed out) and so is the attempt limit (Discard at the last allowed attempt). The
// error comes back beside it as the Submitter returned it. A middleware returns what next
// returned, or a Result of its own (its verdict is recorded; the attempt limit still
// applies); an error returned with a Result of no Verdict is taken as a Submitter's error
// would be, so a middleware that fails before calling next fails the attempt.
//
// Middleware runs inside the job's timeout: work an "after" part does on the database should
// use context.WithoutCancel(ctx) with a bound of its own.
type Middleware interface {
	Submit(ctx context.Context, j Job, next func(context.Context) (batchclaim.Result, error)) (batchclaim.Result, error)
}

// MiddlewareFunc adapts a function to Middleware.
type MiddlewareFunc func(ctx context.Context, j Job, next func(context.Context) (batchclaim.Result, error)) (batchclaim.Result, error)

// Submit calls f.
func (f MiddlewareFunc) Submit(ctx context.Context, j Job, next func(context.Context) (batchclaim.Result, error)) (batchclaim.Result, error) {
	return f(ctx, j, next)
}

// Hooks is a Middleware made of functions called before and after every job, and on its
// error. Each may be nil.
type Hooks struct {
	// Before is called before the job runs. An error fails the attempt as the Submitter's
	// error would, without running the job; a context it returns (nil: ctx) is the job's.
	Before func(ctx context.Context, j Job) (context.Context, error)
	// After is called once the job ran, with the Result its outcome is recorded from and the
	// error, if any; when Before failed, with a zero Result (the runner makes Before's error a
	// failed attempt) and that error.
	After func(ctx context.Context, j Job, r batchclaim.Result, err error)
	// Error is called, before After, when the attempt ended with an error: the Submitter's,
	// Before's, or its context's when the attempt timed out.
	Error func(ctx context.Context, j Job, err error)
}

// Submit runs Before, next, Error and After.
func (h Hooks) Submit(ctx context.Context, j Job, next func(context.Context) (batchclaim.Result, error)) (res batchclaim.Result, err error) {
	if h.Before != nil {
		var bctx context.Context
		if bctx, err = h.Before(ctx, j); bctx != nil {
			ctx = bctx
		}
	}
	if err == nil {
		res, err = next(ctx)
	}
	if err != nil && h.Error != nil {
		h.Error(ctx, j, err)
	}
	if h.After != nil {
		h.After(ctx, j, res, err)
	}
	return res, err
}

// traced is the Pool's first middleware: the span of one submission (tracing.Post), with the
// job's attributes, its HTTP status and its error.
type traced struct{}

func (traced) Submit(ctx context.Context, j Job, next func(context.Context) (batchclaim.Result, error)) (batchclaim.Result, error) {
	ctx, span := tracing.StartJob(ctx, tracing.Post, j)
	res, err := next(ctx)
	if span.IsRecording() {
		span.SetAttributes(tracing.HTTPCode.Int(res.HTTPStatus))
	}
	tracing.End(span, err)
	return res, err
}

// chain returns the function that runs j through the Pool's middlewares, first outermost,
// and call innermost. What each middleware returns is made the Result the outcome would be
// recorded from before the next one out sees it: a Result of no verdict takes its error's
// (or Unknown), and the attempt limit applies.
func (p *Pool) chain(j *Job, call func(context.Context) (batchclaim.Result, error)) func(context.Context) (batchclaim.Result, error) {
	next := call
	for i := len(p.mws) - 1; i >= 0; i-- {
		m, inner := p.mws[i], next
		next = func(ctx context.Context) (batchclaim.Result, error) {
			r, err := m.Submit(ctx, *j, inner)
			return p.settle(ctx, *j, r, err), err
		}
	}
	return next
}

// settle is the Result a middleware's answer comes to: its own verdict if it gave one (the
// attempt limit applied), else its error's.
func (p *Pool) settle(ctx context.Context, j Job, r batchclaim.Result, err error) batchclaim.Result {
	if r.Verdict != 0 {
		err = nil
	}
	return p.verdict(ctx, j, r, err)
}
