package submitter

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/claims"
)

// Submitter runs one batch. An error means the same as Verdict Unknown, or Retry with
// Config.RetryErrors. ctx carries the job's claim (batchclaim.ClaimFrom), ends when the claim
// is lost, and has the submit timeout as its deadline.
type Submitter interface {
	Submit(ctx context.Context, b batchclaim.Batch) (batchclaim.Result, error)
}

// SubmitterFunc adapts a function to Submitter.
type SubmitterFunc func(ctx context.Context, b batchclaim.Batch) (batchclaim.Result, error)

func (f SubmitterFunc) Submit(ctx context.Context, b batchclaim.Batch) (batchclaim.Result, error) {
	return f(ctx, b)
}

// Job is a batch handed over by the queuer with the claim it runs under.
type Job = batchclaim.Job

// Recorder records a submission's outcome (package observer implements it). The job arrives
// marked in flight already (the queuer marks a round's heads in one statement).
type Recorder interface {
	// Finish records the outcome, fenced on the claim and the attempt. With o.Chain it may
	// also mark the service_id's next batch in flight in the same write and return it (ok).
	Finish(ctx context.Context, o batchclaim.Outcome) (next Job, ok bool, err error)
}

// Lease says whether a claim may still be worked on (claims.Engine implements it).
type Lease interface {
	// Holds returns the claim on serviceID if this instance may work on it now: held, and
	// the local deadline not passed.
	Holds(serviceID string) (claims.Claim, bool)
	// Deadline is the local deadline: past it the instance fences itself.
	Deadline() time.Time
}

// Defaults.
const (
	WorkersDefault       = 1024
	MaxMemoryDefault     = 64 << 20
	BackoffBaseDefault   = 200 * time.Millisecond
	BackoffMaxDefault    = 30 * time.Second
	SubmitTimeoutDefault = 60 * time.Second
)

// Config configures a Pool.
type Config struct {
	// Workers bounds concurrent submissions: calls to the Submitter. A submission's outcome is
	// written after its worker is free again (a worker waits for no database write). At most
	// one batch of a service_id is in flight, so more workers than service_ids with work add
	// nothing. Zero means 1024: a worker is a goroutine for the call alone, so the default is
	// wide enough that a burst of new work on many keys starts at once rather than in waves
	// (docs/operations.md, --workers); set fewer to bound what the Submitter's calls load.
	Workers int
	// MaxMemory bounds the bytes of the payloads the running submissions hold: a job is handed
	// out (or chained) only while its payload fits, except one at a time when nothing else
	// runs, so that a batch larger than the bound still goes. Zero means 64 MiB.
	MaxMemory int64
	// Timeout bounds one submission (the claim engine's S). Zero means 60s. A job's own timeout
	// (Batch.Timeout), or else its kind's (a Submitter that implements Timeouter), ends its
	// context sooner; neither can make it longer.
	Timeout time.Duration
	// BackoffBase and BackoffMax shape the capped, jittered exponential delay before a DELAYED
	// batch is tried again: about base * 2^attempts (+-50%), capped at max; a Retry-After from
	// the server is honoured when longer. Zero means 200ms and 30s.
	BackoffBase, BackoffMax time.Duration
	// RetryErrors makes an error returned by the Submitter a Retry (DELAYED, tried again after
	// the backoff) instead of Unknown: for a job runner, whose outcome nobody can be asked
	// about, so that an UNKNOWN batch would only wait out its grace and go again.
	RetryErrors bool
	// MaxAttempts bounds the attempts of a job that keeps ending Retry or Unknown: its last
	// allowed attempt's outcome becomes Discard (DISCARDED, which frees the service_id for its
	// next batch). A job's own limit (Batch.MaxAttempts) comes first. Zero means no limit.
	MaxAttempts int
	// Lease, when set, is asked right before each call to the Submitter whether the claim is
	// still held with its epoch and the local deadline has not passed (a process resumed after
	// a long pause may not have noticed yet: its watchdog may not have run). Nil means the
	// claim's context alone guards the call.
	Lease Lease
	// Middleware wraps every submission, first outermost (see Middleware), inside the Pool's
	// own tracing span. Nil means none.
	Middleware []Middleware
	// MayChain, when set, is asked after each submission whether its worker may go on with
	// the service_id's next batch at once; run is how many jobs of the service_id the worker
	// has run in a row so far (1 after the first). The queuer lets a worker go on for a
	// while even when other service_ids wait for a worker. Nil never chains: every job comes
	// from the queuer.
	MayChain func(j Job, run int) bool
	// Chained, when set, is called when a worker goes on from prev to next, the next batch of
	// the same service_id that prev's outcome write marked in flight.
	Chained func(prev, next Job)
	// Logger; nil discards.
	Logger *slog.Logger
}

// Pool is a bounded pool of submission workers.
type Pool struct {
	cfg      Config
	sub      Submitter
	timeouts Timeouter // sub's, if it has them
	mws      []Middleware
	rec      Recorder
	log      *slog.Logger
	done     func(j Job)

	slots   chan struct{} // one per Submitter call running
	waiting atomic.Int64  // jobs marked in flight waiting for a slot
	wg      sync.WaitGroup

	stopped context.Context // ended by Cancel, which ends every running submission too (calls)
	cancel  context.CancelFunc
	mu      sync.Mutex
	running map[string]int  // service_id -> submissions running
	calls   map[int64]*call // seq -> the job running for it from its call to its outcome (cancel.go)
	held    int64           // bytes of the payloads of the running submissions
}

// New returns a Pool that runs jobs with sub and records their outcomes with rec. done, if not
// nil, is called when a job is over, whatever happened.
func New(sub Submitter, rec Recorder, done func(Job), cfg Config) (*Pool, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("submitter: %w", err)
	}
	if sub == nil || rec == nil {
		return nil, errors.New("submitter: nil Submitter or Recorder")
	}
	stopped, cancel := context.WithCancel(context.Background())
	timeouts, _ := sub.(Timeouter)
	mws := append([]Middleware{traced{}}, cfg.Middleware...)
	return &Pool{cfg: cfg, sub: sub, timeouts: timeouts, mws: mws, rec: rec, log: cfg.Logger, done: done, slots: make(chan struct{}, cfg.Workers),
		stopped: stopped, cancel: cancel, running: map[string]int{}, calls: map[int64]*call{}}, nil
}

// withDefaults replaces zero values with the defaults they stand for.
func (c Config) withDefaults() Config {
	c.Workers = cmp.Or(c.Workers, WorkersDefault)
	c.MaxMemory = cmp.Or(c.MaxMemory, MaxMemoryDefault)
	c.Timeout = cmp.Or(c.Timeout, SubmitTimeoutDefault)
	c.BackoffBase = cmp.Or(c.BackoffBase, BackoffBaseDefault)
	c.BackoffMax = cmp.Or(c.BackoffMax, BackoffMaxDefault)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// validate says what is wrong with a configuration after withDefaults.
func (c Config) validate() error {
	var errs []error
	if c.Workers < 0 {
		errs = append(errs, fmt.Errorf("workers must be positive, got %d", c.Workers))
	}
	if c.MaxMemory < 0 {
		errs = append(errs, fmt.Errorf("max memory must be positive, got %d", c.MaxMemory))
	}
	if c.MaxAttempts < 0 {
		errs = append(errs, fmt.Errorf("max attempts must not be negative (0 means no limit), got %d", c.MaxAttempts))
	}
	if c.Timeout < 0 {
		errs = append(errs, fmt.Errorf("timeout must not be negative, got %s", c.Timeout))
	}
	if c.BackoffBase < 0 || c.BackoffMax < c.BackoffBase {
		errs = append(errs, fmt.Errorf("need 0 <= backoff base <= backoff max, got %s and %s", c.BackoffBase, c.BackoffMax))
	}
	return errors.Join(errs...)
}

// Free is the number of idle workers no job waits for.
func (p *Pool) Free() int {
	return max(cap(p.slots)-len(p.slots)-int(p.waiting.Load()), 0)
}

// FreeMemory is how many more payload bytes the running submissions may hold (Config.MaxMemory
// less what they hold), and whether they hold none: a job of any size may then go.
func (p *Pool) FreeMemory() (free int64, empty bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cfg.MaxMemory - p.held, p.held == 0
}

// Busy is the number of Submitter calls running.
func (p *Pool) Busy() int { return len(p.slots) }

// TrySubmit starts j, a job marked in flight, and reports whether it did: it does not once
// the pool is cancelled. Call it for at most Free jobs at a time. j runs at once on an idle
// worker; if a job chained by an outcome's write took the worker Free counted, j waits for
// the next worker to be free (a job marked in flight is never turned away for that).
func (p *Pool) TrySubmit(j Job) bool {
	if p.stopped.Err() != nil {
		return false
	}
	idle := p.reserve() // before TrySubmit returns: the caller's next Free counts j
	p.wg.Add(1)
	p.mu.Lock()
	p.running[j.Batch.ServiceID]++
	p.held += int64(len(j.Batch.Payload))
	p.mu.Unlock()
	go func() {
		last := j
		defer func() {
			p.mu.Lock()
			if p.running[j.Batch.ServiceID]--; p.running[j.Batch.ServiceID] == 0 {
				delete(p.running, j.Batch.ServiceID)
			}
			p.held -= int64(len(last.Batch.Payload))
			p.mu.Unlock()
			p.wg.Done()
			if p.done != nil {
				p.done(last)
			}
		}()
		p.take(idle)
		var under claimRun
		defer under.end()
		for run := 1; ; run++ {
			next, ok := p.run(&under, last, run) // gives the slot back
			if !ok {
				return
			}
			// next is marked in flight already: it waits for a worker if none is idle.
			p.take(p.reserve())
			if p.cfg.Chained != nil {
				p.cfg.Chained(last, next)
			}
			p.mu.Lock()
			p.held += int64(len(next.Batch.Payload) - len(last.Batch.Payload))
			p.mu.Unlock()
			last = next
		}
	}()
	return true
}

// reserve takes an idle worker's slot and reports true, or, with none idle, counts one more
// job waiting for a slot (Free leaves its worker out, so that the queuer hands out no job for
// it) and reports false. A slot is held for a Submitter call only: run gives it back as the
// call returns.
func (p *Pool) reserve() (idle bool) {
	select {
	case p.slots <- struct{}{}:
		return true
	default:
		p.waiting.Add(1)
		return false
	}
}

// take completes reserve: with no idle slot then, it waits for one.
func (p *Pool) take(idle bool) {
	if !idle {
		p.slots <- struct{}{}
		p.waiting.Add(-1)
	}
}

// Overdue is how many Submit calls are still running more than grace past their deadline: a
// Submitter that ignores its context holds a worker and its service_id for good.
func (p *Pool) Overdue(now time.Time, grace time.Duration) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, c := range p.calls {
		if !c.returned.Load() && now.After(c.deadline.Add(grace)) {
			n++
		}
	}
	return n
}

// Running returns the service_ids with a submission running now.
func (p *Pool) Running() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]string, 0, len(p.running))
	for id := range p.running {
		out = append(out, id)
	}
	return out
}

// Cancel cancels every running submission's context (a stopping instance whose drain took
// too long). Their outcomes are not recorded: the batches stay INFLIGHT for the next owner,
// who asks the ledger before sending them again.
func (p *Pool) Cancel() {
	p.cancel()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.calls {
		c.stop()
	}
}

// Wait blocks until every running submission has ended or ctx ends.
func (p *Pool) Wait(ctx context.Context) error {
	ch := make(chan struct{})
	go func() { p.wg.Wait(); close(ch) }()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// run performs one submission of a job marked in flight: the call under the claim's context,
// then the fenced outcome. It returns the service_id's next job when the outcome's write
// marked one in flight for this worker (chaining). It gives the worker's slot back as soon as
// the call has returned (or was not made): the outcome's write, which waits for the
// recorder's next statement, takes no slot another job could use for its call. under is the
// context of the worker's run of j's service_id (claimRun).
func (p *Pool) run(under *claimRun, j Job, run int) (Job, bool) {
	log := jobLogger{p.log, j}
	// The mark is committed; between it and the call the claim may have gone (a takeover, or
	// this process paused past its local deadline without its watchdog having run yet).
	deadline, ok := p.mayPost(j)
	if !ok {
		<-p.slots
		log.Info("claim lost or local deadline passed after the in-flight mark; not posting (the next owner asks the ledger)")
		return Job{}, false
	}
	// claimCtx ends with the claim, or by Cancel; the call's context also at the call's
	// deadline, or by CancelJob.
	under.start(j.Claim)
	claimCtx := under.ctx
	start := time.Now()
	at, cause := p.jobDeadline(j, start, deadline)
	ctx, cancel := context.WithDeadlineCause(under.calls, at, cause)
	c := &under.call // the worker runs one job at a time: its call is made again in place
	*c = call{job: j, attempt: j.Batch.Attempts + 1, deadline: deadline, stop: under.stop, cancel: under.cancelCalls}
	p.track(j.Batch.Seq, c)
	defer p.untrack(j.Batch.Seq, c)
	res := p.call(ctx, &c.job)
	<-p.slots
	latency := time.Since(start)
	p.returned(c)
	cancel()
	res.Output = p.output(log, res.Output)
	o := batchclaim.Outcome{Job: j, Result: res, Latency: latency, RetryIn: p.retryIn(j, res)}
	if p.mayChain(j, run) {
		o.Chain, o.ChainMaxBytes = true, p.chainRoom(j)
	}
	// Recording runs under the claim's context too: a lost claim must not write. A cancelled
	// POST (claim lost, deadline) is left INFLIGHT for the next owner, who treats it as unknown.
	next, ok, err := p.rec.Finish(claimCtx, o)
	switch {
	case err == nil:
	case errors.Is(err, batchclaim.ErrStateChanged):
		log.Info("submission outcome not recorded: the batch moved on (a later attempt, or another writer)", "verdict", res.Verdict.String())
		return Job{}, false
	case claimCtx.Err() == nil && !errors.Is(err, batchclaim.ErrClaimLost):
		log.Warn("could not record submission outcome", "error", err)
		return Job{}, false
	default:
		log.Info("submission outcome not recorded: claim lost", "verdict", res.Verdict.String())
		return Job{}, false
	}
	if log.enabled(slog.LevelDebug) { // its arguments alone cost an allocation each, per job
		log.Debug("submitted", "verdict", res.Verdict.String(), "http_status", res.HTTPStatus, "latency", latency)
	}
	return next, ok
}

// claimRun is the context a worker shares across the jobs of one service_id it runs in a row
// under one claim (a chain, Config.MayChain): the claim's context, ended by the Pool's Cancel
// too, under which each outcome is written, and under it, with the claim as a value, the
// parent of each call's context, which CancelJob ends with its cause. It is made once a
// claim rather than once a job: it is several allocations, and a worker may run thousands
// of a service_id's jobs in a row. Only the parent of the calls is made again, for the job
// after one CancelJob ended.
type claimRun struct {
	claim       batchclaim.Claim
	ctx         context.Context // the claim's context, ended by stop too
	stop        context.CancelFunc
	calls       context.Context // ctx with the claim (batchclaim.WithClaim), ended by cancelCalls too: the parent of each call's
	cancelCalls context.CancelCauseFunc
	// call is the job running now, tracked by the Pool while it runs (track, untrack) and
	// written again for the next job once untracked: nothing else holds it then.
	call call
}

// start makes r the context of claim c, unless it is already: a chained job comes with the
// claim its predecessor's outcome was fenced on, the same acquisition (service_id and epoch),
// whose context is the same. The calls' parent is made again when CancelJob ended it.
func (r *claimRun) start(c batchclaim.Claim) {
	if r.stop != nil && r.claim.ServiceID == c.ServiceID && r.claim.Epoch == c.Epoch && r.claim.ClaimedAt.Equal(c.ClaimedAt) {
		if r.calls.Err() != nil && r.ctx.Err() == nil { // a CancelJob ended the previous call
			r.calls, r.cancelCalls = context.WithCancelCause(batchclaim.WithClaim(r.ctx, c))
		}
		return
	}
	r.end()
	r.claim = c
	r.ctx, r.stop = context.WithCancel(c.Context())
	r.calls, r.cancelCalls = context.WithCancelCause(batchclaim.WithClaim(r.ctx, c))
}

// end ends r's context, once the worker's run is over.
func (r *claimRun) end() {
	if r.stop != nil {
		r.stop()
	}
}

// jobLogger logs a line about one job with the job's attributes, built only for a line that
// is written: run logs at most a debug line for a job that goes well, and an instance runs
// thousands a second.
type jobLogger struct {
	log *slog.Logger
	j   Job
}

func (l jobLogger) Debug(msg string, args ...any) { l.write(slog.LevelDebug, msg, args) }
func (l jobLogger) Info(msg string, args ...any)  { l.write(slog.LevelInfo, msg, args) }
func (l jobLogger) Warn(msg string, args ...any)  { l.write(slog.LevelWarn, msg, args) }

func (l jobLogger) enabled(level slog.Level) bool { return l.log.Enabled(context.Background(), level) }

func (l jobLogger) write(level slog.Level, msg string, args []any) {
	if !l.enabled(level) {
		return
	}
	l.log.Log(context.Background(), level, msg, append([]any{"service_id", l.j.Batch.ServiceID, "batch_id", short(l.j.Batch.BatchID),
		"epoch", l.j.Claim.Epoch, "seq", l.j.Batch.Seq}, args...)...)
}

// call runs j through the middlewares and the Submitter under ctx and returns the Result
// its outcome is recorded from. j is the job its run keeps (call.job), not a copy: every
// step of the chain reads it through the pointer rather than holding its own copy.
func (p *Pool) call(ctx context.Context, j *Job) batchclaim.Result {
	res, _ := p.chain(j, func(ctx context.Context) (batchclaim.Result, error) {
		res, err := p.sub.Submit(ctx, j.Batch)
		return p.verdict(ctx, *j, res, err), err
	})(ctx)
	return res
}

// verdict is what a submission's result and error come to: a SnoozeError is Snooze; another
// error is Unknown (Retry with RetryErrors), with the timeout or the cancel in its detail when
// ctx ended by it; no verdict is Unknown; and a Retry or Unknown at the job's last allowed
// attempt is Discard.
func (p *Pool) verdict(ctx context.Context, j Job, res batchclaim.Result, err error) batchclaim.Result {
	if d, ok := batchclaim.SnoozeDelay(err); ok { // not a failure: the job asks to run later
		res = batchclaim.Result{Verdict: batchclaim.Snooze, HTTPStatus: res.HTTPStatus, RetryAfter: d, Detail: err.Error(), Output: res.Output}
		err = nil
	}
	if err != nil {
		v := batchclaim.Unknown
		if p.cfg.RetryErrors {
			v = batchclaim.Retry
		}
		detail := err.Error()
		if cause := context.Cause(ctx); (errors.Is(cause, ErrTimeout) || errors.Is(cause, batchclaim.ErrCancelled)) && !strings.Contains(detail, cause.Error()) {
			detail = cause.Error() + ": " + detail
		}
		res = batchclaim.Result{Verdict: v, HTTPStatus: res.HTTPStatus, RetryAfter: res.RetryAfter, Detail: detail, Output: res.Output}
	}
	if res.Verdict == 0 {
		res.Verdict = batchclaim.Unknown
	}
	limit := cmp.Or(j.Batch.MaxAttempts, p.cfg.MaxAttempts)
	if made := j.Batch.Attempts - j.Batch.AttemptBase + 1; (res.Verdict == batchclaim.Retry || res.Verdict == batchclaim.Unknown) && limit > 0 && made >= limit {
		res.Detail = fmt.Sprintf("discarded after %d of %d attempts: %s", made, limit, cmp.Or(res.Detail, res.Verdict.String()))
		res.Verdict = batchclaim.Discard
	}
	return res
}

// chainRoom is the largest payload the job after j may have: what j holds plus what is free,
// or any size (-1) when j is the only submission holding bytes.
func (p *Pool) chainRoom(j Job) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	mine := int64(len(j.Batch.Payload))
	if p.held == mine {
		return -1
	}
	return mine + max(p.cfg.MaxMemory-p.held, 0)
}

// mayChain reports whether j's worker, which ran run jobs of its service_id in a row, may go
// on with the next batch of the service_id.
func (p *Pool) mayChain(j Job, run int) bool {
	if p.stopped.Err() != nil {
		return false
	}
	return p.cfg.MayChain != nil && p.cfg.MayChain(j, run)
}

// mayPost reports whether j may be posted now, and until when the call may run (the
// submission timeout S). The call also ends when the claim's context does: the engine
// cancels it the moment the local deadline passes without a renewal, so a call runs until
// the earlier of S and the local deadline as renewals move it.
func (p *Pool) mayPost(j Job) (time.Time, bool) {
	if p.stopped.Err() != nil {
		return time.Time{}, false
	}
	if err := j.Claim.Context().Err(); err != nil {
		return time.Time{}, false
	}
	if p.cfg.Lease != nil {
		c, ok := p.cfg.Lease.Holds(j.Claim.ServiceID)
		if !ok || c.Epoch != j.Claim.Epoch || !time.Now().Before(p.cfg.Lease.Deadline()) {
			return time.Time{}, false
		}
	}
	return time.Now().Add(p.cfg.Timeout), true
}

// backoff is the delay before a DELAYED batch may be tried again: step attempts+1 of a
// jittered exponential backoff (base, doubling, capped at max, randomization 0.5), or the
// server's Retry-After when that is longer. The attempt count lives in the database, so each
// retry may run on another instance and still back off further.
func (p *Pool) backoff(attempts int, retryAfter time.Duration) time.Duration {
	// A value, not NewExponentialBackOff's pointer: every outcome computes one.
	b := backoff.ExponentialBackOff{InitialInterval: p.cfg.BackoffBase, MaxInterval: p.cfg.BackoffMax,
		Multiplier: 2, RandomizationFactor: 0.5, MaxElapsedTime: 0, Stop: backoff.Stop, Clock: backoff.SystemClock}
	b.Reset()
	d := b.NextBackOff()
	for range min(attempts, 40) {
		d = b.NextBackOff()
	}
	return max(d, retryAfter)
}

func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
