package observer

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/claims"
	"github.com/batchclaim/batchclaim/internal/db"
	"github.com/batchclaim/batchclaim/internal/tracing"
	"github.com/batchclaim/batchclaim/pgdb"
)

// Fencer is the part of claims.Engine the observer needs.
type Fencer interface {
	InstanceID() uuid.UUID
	// Nonce is the process's token on its registry row; every fenced statement matches it.
	Nonce() uuid.UUID
	Held() []claims.Claim
	// Holds returns the claim on serviceID if this instance may work on it now.
	Holds(serviceID string) (claims.Claim, bool)
	// Fenced drops a claim a fenced write found stale.
	Fenced(c claims.Claim)
	// DBNow is the time statements judge the lease by (nil: the database's now()).
	DBNow(ctx context.Context, q pgdb.Querier) (*time.Time, error)
	// Retry runs a statement again after a lock timeout, deadlock or serialization failure.
	Retry(ctx context.Context, fn func() error) error
}

// Transition is one recorded state change.
type Transition struct {
	Seq        int64
	ServiceID  string
	BatchID    string
	From, To   batchclaim.State
	AgeSeconds float64 // since the batch was stored (database clock)
}

// Recorder defaults.
const (
	// MaxRowsPerStatement bounds the rows one set-based write carries; more are split.
	MaxRowsPerStatement = 1000
	// FlushTimeoutDefault bounds one group write of outcomes.
	FlushTimeoutDefault = 30 * time.Second
)

// RecorderConfig configures a Recorder.
type RecorderConfig struct {
	// HaltOnInvalid halts a service_id when one of its batches is INVALID: nothing more is
	// sent for it until an operator resumes it (Resume, batchclaim resume). False (the default) treats
	// INVALID as terminal for that batch only and goes on with the next.
	HaltOnInvalid bool
	// SkipValid: VALID fixes the order (scabbard), so a VALID batch does not hold back the next
	// one. It must match the queuer's setting.
	SkipValid bool
	// TrackIdle writes a service_id's active_at when its last unfinished batch finishes: the
	// idle clock of claims.Config.DropIdleAfter. Set it when idle claim rows are dropped.
	TrackIdle bool
	// FlushTimeout bounds one group write of outcomes. Zero means 30s.
	FlushTimeout time.Duration
	// Events receives status changes.
	Events *Events
	// Recorded, when set, is called with the service_id of every batch a write changed
	// (its state, or its count of UNKNOWN answers), so that the queuer looks at it again;
	// not for an outcome whose write marked the service_id's next batch in flight for its
	// caller (Finish returns it): the service_id's work is in flight again.
	Recorded func(serviceID string)
	// Drained, when set, is called instead of Recorded for an outcome that finished its batch
	// (seq) and left its service_id without an unfinished batch, as far as the write saw:
	// there is nothing for the queuer to look at until more work arrives, and an enqueue
	// wakes the service_id's holder.
	Drained func(serviceID string, seq int64)
	// Logger receives a WARN line for every batch recorded INVALID (and for the halt of its
	// service_id with HaltOnInvalid) or DISCARDED, with the reason. Nil means discard.
	Logger *slog.Logger
}

// Recorder makes the fenced, synchronous writes about batches, a set at a time.
type Recorder struct {
	db    pgdb.Querier // the DB given to NewRecorder: the recorder starts no transaction
	fence Fencer
	cfg   RecorderConfig
	q     *db.Queries

	mu      sync.Mutex // guards pending and leading
	pending []*outcome // outcomes waiting for the next group write
	leading bool       // a Finish is writing, or has been handed the next group's write
}

// queries are the observer's statements; they hold no state (the constructors' db parameter
// hides the package's name).
var queries = db.New()

// NewRecorder returns a Recorder that writes in db, fenced by fence's claims. It does no I/O.
func NewRecorder(db pgdb.DB, fence Fencer, cfg RecorderConfig) (*Recorder, error) {
	if err := db.Err(); err != nil {
		return nil, fmt.Errorf("observer: %w", err)
	}
	if fence == nil {
		return nil, errors.New("observer: the recorder needs a fencer")
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("observer: %w", err)
	}
	return &Recorder{db: db, fence: fence, cfg: cfg, q: queries}, nil
}

// withDefaults returns c with every zero field filled in.
func (c RecorderConfig) withDefaults() RecorderConfig {
	c.FlushTimeout = cmp.Or(c.FlushTimeout, FlushTimeoutDefault)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// validate checks c with its defaults filled in.
func (c RecorderConfig) validate() error {
	if c.FlushTimeout < 0 {
		return fmt.Errorf("the recorder's FlushTimeout must not be negative, got %s", c.FlushTimeout)
	}
	return nil
}

// Mark marks the jobs' batches in flight before their POSTs, in one statement per
// MaxRowsPerStatement jobs, each fenced on its own claim and conditional on its batch still
// being in FromState. It returns the jobs marked, in order, with their payload and attempt
// count filled in. The attempt log's row of each POST is written by Finish with its outcome
// (or, for a POST whose outcome is never recorded, by its batch's adoption). A job whose
// claim is no longer held with its epoch is left out and its claim dropped
// (batchclaim.ErrClaimLost for that job alone); a job whose batch moved on meanwhile is left
// out and its claim kept (batchclaim.ErrStateChanged). The error is for the statement as a
// whole.
func (r *Recorder) Mark(ctx context.Context, jobs []batchclaim.Job) ([]batchclaim.Job, error) {
	var out []batchclaim.Job
	for chunk := range chunks(jobs) {
		marked, err := r.mark(ctx, chunk)
		out = append(out, marked...)
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

func (r *Recorder) mark(ctx context.Context, jobs []batchclaim.Job) ([]batchclaim.Job, error) {
	now, err := r.fence.DBNow(ctx, r.db)
	if err != nil {
		return nil, err
	}
	p := db.BatchesMarkInflightParams{Claimant: r.fence.InstanceID(), Nonce: r.fence.Nonce(), Now: now}
	for _, j := range jobs {
		p.Seqs = append(p.Seqs, j.Batch.Seq)
		p.ServiceIds = append(p.ServiceIds, j.Claim.ServiceID)
		p.Epochs = append(p.Epochs, j.Claim.Epoch)
		p.FromStates = append(p.FromStates, string(j.FromState))
		p.Reasons = append(p.Reasons, string(j.Reason))
	}
	var rows []db.BatchesMarkInflightRow
	if err := r.fence.Retry(ctx, func() (err error) {
		rows, err = r.q.BatchesMarkInflight(ctx, r.db, p)
		return err
	}); err != nil {
		return nil, fmt.Errorf("mark in flight: %w", err)
	}
	bySeq := make(map[int64]db.BatchesMarkInflightRow, len(rows))
	for _, row := range rows {
		bySeq[row.Seq] = row
	}
	out := make([]batchclaim.Job, 0, len(jobs))
	for _, j := range jobs {
		row := bySeq[j.Batch.Seq]
		switch {
		case row.Marked:
			j.Batch.Payload = row.Payload
			j.Batch.Attempts = int(row.Attempts) - 1
			j.Batch.MaxAttempts = int(row.MaxAttempts)
			j.Batch.AttemptBase = int(row.AttemptBase)
			j.Batch.Kind, j.Batch.Timeout = row.Kind, time.Duration(row.TimeoutMs)*time.Millisecond
			out = append(out, j)
		case !row.Fenced:
			r.fence.Fenced(j.Claim)
		}
	}
	return out, nil
}

// Take is what Recorder.Take reads and marks: the heads of the claims' service_ids, in
// order, with a budget for the heads marked at once.
type Take struct {
	Claims []claims.Claim
	// Floors, one per claim (0: none), is a pos no unfinished batch of the service_id is
	// below (the queuer's, from the heads it read before). Not used with SkipValid.
	Floors []int64
	// MaxJobs and MaxBytes bound the heads marked and their payload bytes in all; AnySize lets
	// the first one go whatever its size (the workers hold nothing).
	MaxJobs  int
	MaxBytes int64
	AnySize  bool
}

// Head is the head (the oldest unfinished batch) of a service_id as Take read it, with what
// the queuer decides on, judged by the database clock.
type Head struct {
	Seq       int64
	ServiceID string
	BatchID   string
	State     batchclaim.State // as read, before Take's own mark
	Attempts  int              // attempts made, as read
	// ClaimEpoch is the epoch of the claim it was last marked in flight under; 0 if it never
	// was (claim epochs start at 1).
	ClaimEpoch   int64
	Pos          int64 // its place in the service_id's queue
	UnknownCount int   // consecutive UNKNOWN answers from the ledger about its last POST
	Size         int64 // payload bytes
	// Due reports whether it may go now by its time (a run-at time, a retry's backoff);
	// DueIn is how long until it may, when not.
	Due   bool
	DueIn time.Duration
	// UnknownFor is how long it has been UNKNOWN (0 in another state).
	UnknownFor time.Duration
	// Wanted: NEW, due and within Take's budget, so Take tried to mark it; Fenced: its claim
	// was held with its epoch; Marked: Take marked it in flight (it is among the jobs).
	Wanted, Fenced, Marked bool
}

func headOf(row db.BatchesTakeHeadsRow) Head {
	h := Head{Seq: row.Seq, ServiceID: row.ServiceID, BatchID: row.BatchID, State: batchclaim.State(row.State),
		Attempts: int(row.Attempts), Pos: row.Pos, UnknownCount: int(row.UnknownCount), Size: row.Size,
		Due: row.Due, DueIn: seconds(row.DueInSeconds), UnknownFor: seconds(row.UnknownSeconds),
		Wanted: row.Wanted, Fenced: row.Fenced, Marked: row.Marked}
	if row.ClaimEpoch != nil {
		h.ClaimEpoch = *row.ClaimEpoch
	}
	return h
}

func seconds(s float64) time.Duration {
	return time.Duration(s * float64(time.Second))
}

// Take reads the head (oldest unfinished batch) of each of t.Claims' service_ids and, in the
// same statement, marks in flight the heads that are NEW and due, in order, within t's
// budget, each fenced on its own claim as Mark fences (a job whose claim is no longer held
// with its epoch is left out and its claim dropped). It returns every head read (the queuer
// decides on the ones not marked: Wanted is false for them) and the jobs marked, in order,
// with their payload and attempt count filled in.
func (r *Recorder) Take(ctx context.Context, t Take) ([]Head, []batchclaim.Job, error) {
	now, err := r.fence.DBNow(ctx, r.db)
	if err != nil {
		return nil, nil, err
	}
	p := db.BatchesTakeHeadsParams{Floors: t.Floors, SkipValid: r.cfg.SkipValid, MaxJobs: int32(min(t.MaxJobs, math.MaxInt32)),
		MaxBytes: t.MaxBytes, AnySize: t.AnySize, Claimant: r.fence.InstanceID(), Nonce: r.fence.Nonce(), Now: now}
	byID := make(map[string]claims.Claim, len(t.Claims))
	for _, c := range t.Claims {
		p.ServiceIds = append(p.ServiceIds, c.ServiceID)
		p.Epochs = append(p.Epochs, c.Epoch)
		byID[c.ServiceID] = c
	}
	if p.Floors == nil || r.cfg.SkipValid {
		p.Floors = make([]int64, len(t.Claims))
	}
	var rows []db.BatchesTakeHeadsRow
	if err := r.fence.Retry(ctx, func() (err error) {
		rows, err = r.q.BatchesTakeHeads(ctx, r.db, p)
		return err
	}); err != nil {
		return nil, nil, fmt.Errorf("read head batches: %w", err)
	}
	var jobs []batchclaim.Job
	heads := make([]Head, len(rows))
	for i, row := range rows {
		heads[i] = headOf(row)
		c := byID[row.ServiceID]
		switch {
		case row.Marked:
			jobs = append(jobs, firstJob(c, row.Seq, row.BatchID, row.Payload, row.MarkedAttempts, row.MaxAttempts, row.AttemptBase, row.Kind, row.TimeoutMs))
		case row.Wanted && !row.Fenced:
			r.fence.Fenced(c)
		}
	}
	return heads, jobs, nil
}

// firstJob is the first attempt of a NEW batch of c's service_id that a statement marked in
// flight, from the columns the mark returned (attempts: the count after the mark).
func firstJob(c claims.Claim, seq int64, batchID string, payload []byte, attempts, maxAttempts, attemptBase int32, kind string, timeoutMs int64) batchclaim.Job {
	return batchclaim.Job{Claim: c, FromState: batchclaim.StateNew, Reason: batchclaim.ReasonFirst,
		Batch: batchclaim.Batch{Seq: seq, ServiceID: c.ServiceID, BatchID: batchID,
			Payload: payload, Attempts: int(attempts) - 1, MaxAttempts: int(maxAttempts), AttemptBase: int(attemptBase),
			Kind: kind, Timeout: time.Duration(timeoutMs) * time.Millisecond}}
}

// outcome is one submission's result waiting to be written.
type outcome struct {
	ctx context.Context // the caller's: an outcome whose caller gave up is not written
	batchclaim.Outcome

	next batchclaim.Job // the chained next job, if the write marked one
	err  error
	done chan struct{} // closed once written (next and err are set)
	lead chan struct{} // closed when this caller is to write the pending group
}

// waiters recycles the outcome waiters: Finish makes one a job, hundreds a statement, and
// each (about 600 bytes) would otherwise be garbage once its caller has its result.
var waiters = sync.Pool{New: func() any { return new(outcome) }}

// result returns o's result and recycles o. Call it only when nothing else holds o: its
// group's write has told it its result and it is in no pending group. A waiter whose caller
// gave up is not recycled: a group being written may still hold it.
func (o *outcome) result() (next batchclaim.Job, ok bool, err error) {
	next, err = o.next, o.err
	*o = outcome{} // drops the caller's context and payloads
	waiters.Put(o)
	return next, next.Batch.Seq != 0, err
}

// written reports whether o's write has ended.
func (o *outcome) written() bool {
	select {
	case <-o.done:
		return true
	default:
		return false
	}
}

// Finish records the outcome of a submission (fenced on its claim and on its attempt) and
// returns once it is committed. Outcomes that arrive while another Finish is writing are
// written together in one statement (group commit), so a busy instance writes many outcomes
// per statement and per commit. The caller whose write ends hands the next group to one of
// the callers waiting in it and returns at once: it never goes on to write for others, so no
// service_id's next batch waits while others' outcomes keep arriving. With o.Chain, an
// outcome that frees its service_id also marks the service_id's next batch in flight, if it
// is NEW, in the same statement, and Finish returns it (ok true) for the caller to run at
// once. An outcome whose claim is lost returns batchclaim.ErrClaimLost (nothing is written
// for it); one whose batch moved on, or whose attempt is not the batch's latest any more,
// returns batchclaim.ErrStateChanged.
func (r *Recorder) Finish(ctx context.Context, o batchclaim.Outcome) (next batchclaim.Job, ok bool, err error) {
	_, span := tracing.StartJob(ctx, tracing.Outcome, o.Job)
	if span.IsRecording() {
		span.SetAttributes(tracing.Verdict.String(o.Result.Verdict.String()), tracing.HTTPCode.Int(o.Result.HTTPStatus))
	}
	defer func() { tracing.End(span, err) }()
	w := waiters.Get().(*outcome)
	*w = outcome{ctx: ctx, Outcome: o, done: make(chan struct{}), lead: make(chan struct{})}
	r.mu.Lock()
	r.pending = append(r.pending, w)
	if r.leading {
		if !r.wait(ctx, w) {
			return batchclaim.Job{}, false, ctx.Err()
		}
		if w.written() {
			r.mu.Unlock()
			return w.result()
		}
	}
	// This caller writes the group pending now, its own outcome in it.
	r.leading = true
	batch := r.pending
	r.pending = nil
	r.mu.Unlock()
	r.writeOutcomes(batch)
	r.mu.Lock()
	if len(r.pending) > 0 {
		close(r.pending[0].lead) // the next group's first caller writes it
	} else {
		r.leading = false
	}
	r.mu.Unlock()
	return w.result()
}

// wait waits, with r.mu held on entry, while another caller writes: until w's outcome is
// written, or w is handed the next group's write. It returns with r.mu held, or false with
// r.mu released when ctx ended first: w is then taken out of the pending group, so that the
// write is never handed to a caller that left.
func (r *Recorder) wait(ctx context.Context, w *outcome) bool {
	r.mu.Unlock()
	select {
	case <-w.done:
	case <-w.lead:
	case <-ctx.Done():
	}
	r.mu.Lock()
	select {
	case <-w.lead: // handed the write (under r.mu): it must be done, whatever ctx says
		return true
	case <-w.done:
		return true
	default:
	}
	// ctx ended first. w is either still pending, and taken out here (no write can take it
	// while r.mu is held), or in the group being written, which no longer waits for it.
	r.pending = slices.DeleteFunc(r.pending, func(p *outcome) bool { return p == w })
	r.mu.Unlock()
	return false
}

// writeOutcomes writes a group of outcomes and tells each waiter its result. The write does
// not run under any one caller's context: each row is fenced on its own claim instead, and
// the outcomes whose caller's context ended (the submitter passes the claim's, which ends
// when the claim is lost) are not written at all.
func (r *Recorder) writeOutcomes(batch []*outcome) {
	defer func() {
		for _, o := range batch {
			close(o.done)
		}
	}()
	live := batch[:0:0]
	for _, o := range batch {
		if err := o.ctx.Err(); err != nil {
			o.err = fmt.Errorf("record outcome of %s@%d: %w", o.Job.Claim.ServiceID, o.Job.Claim.Epoch, err)
			continue
		}
		live = append(live, o)
	}
	ctx, cancel := context.WithTimeout(context.Background(), r.cfg.FlushTimeout)
	defer cancel()
	for chunk := range chunks(live) {
		r.writeOutcomeChunk(ctx, chunk)
	}
}

func (r *Recorder) writeOutcomeChunk(ctx context.Context, batch []*outcome) {
	p := outcomeParams(len(batch))
	p.Claimant, p.Nonce, p.HaltOnInvalid, p.SkipValid, p.TrackIdle = r.fence.InstanceID(), r.fence.Nonce(), r.cfg.HaltOnInvalid, r.cfg.SkipValid, r.cfg.TrackIdle
	chain, commits := false, !r.cfg.TrackIdle
	for _, o := range batch {
		j, res := &o.Job, &o.Result
		p.Seqs = append(p.Seqs, j.Batch.Seq)
		p.ServiceIds = append(p.ServiceIds, j.Claim.ServiceID)
		p.Epochs = append(p.Epochs, j.Claim.Epoch)
		p.Attempts = append(p.Attempts, int32(j.Batch.Attempts+1))
		p.NewStates = append(p.NewStates, string(res.Verdict.State()))
		p.DltStatuses = append(p.DltStatuses, string(res.Verdict.Status()))
		p.RetryAfterMs = append(p.RetryAfterMs, o.RetryIn.Milliseconds())
		lastErr := ""
		if res.Verdict != batchclaim.Accepted && res.Verdict != batchclaim.Done {
			lastErr = res.Detail
		}
		p.LastErrors = append(p.LastErrors, lastErr)
		invalid := jsonOrEmpty(res.Invalid)
		p.InvalidDetails = append(p.InvalidDetails, invalid)
		p.HttpStatuses = append(p.HttpStatuses, int32(res.HTTPStatus))
		p.LatenciesMs = append(p.LatenciesMs, float64(o.Latency.Microseconds())/1000)
		p.Outcomes = append(p.Outcomes, res.Verdict.String())
		p.Chain = append(p.Chain, o.Chain)
		p.ChainMaxBytes = append(p.ChainMaxBytes, o.ChainMaxBytes)
		p.Outputs = append(p.Outputs, jsonOrEmpty(res.Output))
		chain = chain || o.Chain
		commits = commits && res.Verdict == batchclaim.Done && invalid == ""
	}
	var rows []db.BatchesRecordOutcomesRow
	var commitRows []db.BatchesRecordCommitsRow
	err := r.fence.Retry(ctx, func() (err error) {
		if chain { // the chained marks judge the lease by the engine's clock
			if p.Now, err = r.fence.DBNow(ctx, r.db); err != nil {
				return err
			}
		}
		if commits {
			commitRows, err = r.q.BatchesRecordCommits(ctx, r.db, commitsParams(p))
			return err
		}
		rows, err = r.q.BatchesRecordOutcomes(ctx, r.db, p)
		return err
	})
	if err != nil {
		for _, o := range batch {
			o.err = fmt.Errorf("record outcome: %w", err)
		}
		return
	}
	if commits {
		settleOutcomes(r, batch, commitRows)
	} else {
		settleOutcomes(r, batch, rows)
	}
}

// outcomeParams returns the parameters of an outcome statement with room for n rows in each
// array: a group of successes writes hundreds of rows, and arrays grown row by row would be
// copied several times over.
func outcomeParams(n int) db.BatchesRecordOutcomesParams {
	return db.BatchesRecordOutcomesParams{
		Seqs: make([]int64, 0, n), ServiceIds: make([]string, 0, n), Epochs: make([]int64, 0, n), Attempts: make([]int32, 0, n),
		NewStates: make([]string, 0, n), DltStatuses: make([]string, 0, n), RetryAfterMs: make([]int64, 0, n),
		LastErrors: make([]string, 0, n), InvalidDetails: make([]string, 0, n), HttpStatuses: make([]int32, 0, n),
		LatenciesMs: make([]float64, 0, n), Outcomes: make([]string, 0, n), Chain: make([]bool, 0, n),
		ChainMaxBytes: make([]int64, 0, n), Outputs: make([]string, 0, n),
	}
}

// commitsParams are BatchesRecordCommits' parameters for a group of successes whose
// BatchesRecordOutcomes parameters are p: the same, less those its rows never need.
func commitsParams(p db.BatchesRecordOutcomesParams) db.BatchesRecordCommitsParams {
	return db.BatchesRecordCommitsParams{
		Seqs: p.Seqs, ServiceIds: p.ServiceIds, Epochs: p.Epochs, Attempts: p.Attempts, RetryAfterMs: p.RetryAfterMs,
		HttpStatuses: p.HttpStatuses, LatenciesMs: p.LatenciesMs, Chain: p.Chain, ChainMaxBytes: p.ChainMaxBytes, Outputs: p.Outputs,
		Claimant: p.Claimant, Nonce: p.Nonce, Now: p.Now, SkipValid: p.SkipValid,
	}
}

// outcomeRow is a row of an outcome statement: BatchesRecordCommits writes, for a group of
// successes, the rows BatchesRecordOutcomes writes, and returns the same columns
// (TestCommitsWriteWhatOutcomesWrite).
type outcomeRow interface {
	db.BatchesRecordOutcomesRow | db.BatchesRecordCommitsRow
}

// settleOutcomes tells each outcome of batch what its write did (rows, one per outcome, by
// seq): its error if it was not written, else its status change, and the next job when the
// write chained one.
func settleOutcomes[R outcomeRow](r *Recorder, batch []*outcome, rows []R) {
	at := make(map[int64]int, len(rows))
	for i := range rows {
		at[db.BatchesRecordOutcomesRow(rows[i]).Seq] = i
	}
	for _, o := range batch {
		var row db.BatchesRecordOutcomesRow
		if i, ok := at[o.Job.Batch.Seq]; ok {
			row = db.BatchesRecordOutcomesRow(rows[i])
		}
		j := &o.Job
		switch {
		case !row.Fenced:
			r.fence.Fenced(j.Claim)
			o.err = fmt.Errorf("record outcome of %s@%d: %w", j.Claim.ServiceID, j.Claim.Epoch, batchclaim.ErrClaimLost)
		case !row.Recorded:
			o.err = fmt.Errorf("record outcome of batch %d attempt %d: %w", j.Batch.Seq, j.Batch.Attempts+1, batchclaim.ErrStateChanged)
		default:
			to := batchclaim.State(cmp.Or(row.NewState, string(o.Result.Verdict.State()))) // CANCELLED when a cancel was requested
			r.cfg.Events.statusChanged(Transition{Seq: j.Batch.Seq, ServiceID: j.Claim.ServiceID, BatchID: j.Batch.BatchID,
				From: batchclaim.StateInflight, To: to, AgeSeconds: row.AgeSeconds})
			switch to {
			case batchclaim.StateCancelled:
				r.cfg.Logger.Info("batch CANCELLED while it ran: its service_id goes on with the next batch",
					"service_id", j.Claim.ServiceID, "seq", j.Batch.Seq, "batch_id", j.Batch.BatchID, "verdict", o.Result.Verdict.String())
			case batchclaim.StateInvalid:
				r.logInvalid(j.Claim.ServiceID, j.Batch.Seq, j.Batch.BatchID, o.Result.Detail, o.Result.Invalid)
			case batchclaim.StateDiscarded:
				r.cfg.Logger.Warn("batch DISCARDED: no more attempts; its service_id goes on with the next batch (retry it with batchclaim retry)",
					"service_id", j.Claim.ServiceID, "seq", j.Batch.Seq, "batch_id", j.Batch.BatchID, "attempts", j.Batch.Attempts+1, "reason", o.Result.Detail)
			}
			switch {
			case row.NextSeq != 0: // the service_id's next batch is this caller's to run: nothing to look at
				o.next = firstJob(j.Claim, row.NextSeq, row.NextBatchID, row.NextPayload, row.NextAttempts,
					row.NextMaxAttempts, row.NextAttemptBase, row.NextKind, row.NextTimeoutMs)
			case row.Drained && r.cfg.Drained != nil:
				r.cfg.Drained(j.Claim.ServiceID, j.Batch.Seq)
			default:
				r.recorded(j.Claim.ServiceID)
			}
		}
	}
}

// logInvalid logs a batch recorded INVALID at WARN with its reason: the halt of its service_id
// with HaltOnInvalid (an operator must resume it), else that the service_id goes on without it.
func (r *Recorder) logInvalid(serviceID string, seq int64, batchID, reason string, invalid []byte) {
	args := []any{"service_id", serviceID, "seq", seq, "batch_id", batchID, "reason", reason}
	if len(invalid) > 0 {
		args = append(args, "invalid_details", string(invalid))
	}
	if r.cfg.HaltOnInvalid {
		r.cfg.Logger.Warn("service_id halted: batch INVALID; resume it once the cause is fixed", args...)
		return
	}
	r.cfg.Logger.Warn("batch INVALID: skipped, its service_id goes on with the next batch", args...)
}

func (r *Recorder) recorded(serviceID string) {
	if r.cfg.Recorded != nil {
		r.cfg.Recorded(serviceID)
	}
}

// Adopt turns batches left INFLIGHT (by a previous owner, or by this instance before it was
// fenced) into UNKNOWN under the claims of their service_ids, in one statement, so that the
// ledger is asked before they are sent again: the resubmission grace starts afresh. Each job
// names the claim and the batch (its Attempts as stored).
func (r *Recorder) Adopt(ctx context.Context, jobs []batchclaim.Job) error {
	ups := make([]StatusUpdate, len(jobs))
	for i, j := range jobs {
		ups[i] = StatusUpdate{Claim: j.Claim, Seq: j.Batch.Seq, BatchID: j.Batch.BatchID, Attempt: j.Batch.Attempts,
			From: batchclaim.StateInflight, Status: batchclaim.StatusUnknown, Detail: string(j.Reason), Adopted: true}
	}
	return r.RecordStatuses(ctx, ups)
}

// StatusUpdate is one ledger answer to record.
type StatusUpdate struct {
	Claim   claims.Claim // the claim of the batch's service_id the answer is recorded under
	Seq     int64
	BatchID string
	Attempt int              // the batch's attempt count when the ledger was asked
	From    batchclaim.State // the state the batch was in when the ledger was asked
	Status  batchclaim.Status
	Invalid []byte // JSON details of invalid transactions
	Detail  string
	// Adopted marks the UNKNOWN of an orphaned in-flight batch: no answer from the ledger, so
	// it does not count towards the consecutive UNKNOWN answers that allow a resubmission, and
	// the resubmission grace starts afresh.
	Adopted bool
}

// RecordStatuses records ledger answers in one statement per MaxRowsPerStatement updates,
// each fenced on its own claim; updates whose batch moved on meanwhile are skipped. Answers
// that change nothing (the same state again, except UNKNOWN, whose consecutive answers are
// counted) are left out, so a poll that learns nothing writes nothing. Updates whose claim is
// lost are dropped, their claims too, and the error wraps batchclaim.ErrClaimLost.
func (r *Recorder) RecordStatuses(ctx context.Context, ups []StatusUpdate) error {
	var errs []error
	todo := make([]StatusUpdate, 0, len(ups))
	for _, u := range ups {
		if u.Status.State() == u.From && u.Status != batchclaim.StatusUnknown {
			continue
		}
		todo = append(todo, u)
	}
	for chunk := range chunks(todo) {
		if err := r.recordStatuses(ctx, chunk); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (r *Recorder) recordStatuses(ctx context.Context, ups []StatusUpdate) error {
	p := db.BatchesRecordStatusesParams{Claimant: r.fence.InstanceID(), Nonce: r.fence.Nonce(),
		HaltOnInvalid: r.cfg.HaltOnInvalid, TrackIdle: r.cfg.TrackIdle}
	for _, u := range ups {
		p.Seqs = append(p.Seqs, u.Seq)
		p.ServiceIds = append(p.ServiceIds, u.Claim.ServiceID)
		p.Epochs = append(p.Epochs, u.Claim.Epoch)
		p.Attempts = append(p.Attempts, int32(u.Attempt))
		p.FromStates = append(p.FromStates, string(u.From))
		p.NewStates = append(p.NewStates, string(u.Status.State()))
		p.DltStatuses = append(p.DltStatuses, string(u.Status))
		p.Answers = append(p.Answers, !u.Adopted)
		p.InvalidDetails = append(p.InvalidDetails, jsonOrEmpty(u.Invalid))
		p.Details = append(p.Details, cmp.Or(u.Detail, "ledger: "+string(u.Status)))
	}
	var rows []db.BatchesRecordStatusesRow
	if err := r.fence.Retry(ctx, func() (err error) {
		rows, err = r.q.BatchesRecordStatuses(ctx, r.db, p)
		return err
	}); err != nil {
		return fmt.Errorf("record statuses: %w", err)
	}
	bySeq := make(map[int64]db.BatchesRecordStatusesRow, len(rows))
	for _, row := range rows {
		bySeq[row.Seq] = row
	}
	var lost []string
	dropped := map[string]bool{}
	for _, u := range ups {
		row := bySeq[u.Seq]
		switch {
		case !row.Fenced:
			if !dropped[u.Claim.ServiceID] {
				dropped[u.Claim.ServiceID] = true
				r.fence.Fenced(u.Claim)
				lost = append(lost, fmt.Sprintf("%s@%d", u.Claim.ServiceID, u.Claim.Epoch))
			}
		case row.Recorded:
			if u.Status.State() != u.From {
				r.cfg.Events.statusChanged(Transition{Seq: u.Seq, ServiceID: u.Claim.ServiceID, BatchID: u.BatchID,
					From: u.From, To: u.Status.State(), AgeSeconds: row.AgeSeconds})
				if u.Status.State() == batchclaim.StateInvalid {
					r.logInvalid(u.Claim.ServiceID, u.Seq, u.BatchID, cmp.Or(u.Detail, "ledger: "+string(u.Status)), u.Invalid)
				}
			}
			r.recorded(u.Claim.ServiceID)
		}
	}
	if len(lost) > 0 {
		return fmt.Errorf("record statuses under %v: %w", lost, batchclaim.ErrClaimLost)
	}
	return nil
}

// chunks splits s into runs of at most MaxRowsPerStatement.
func chunks[T any](s []T) func(func([]T) bool) {
	return func(yield func([]T) bool) {
		for len(s) > 0 {
			n := min(len(s), MaxRowsPerStatement)
			if !yield(s[:n]) {
				return
			}
			s = s[n:]
		}
	}
}

func jsonOrEmpty(b []byte) string {
	if len(b) == 0 || !json.Valid(b) {
		return ""
	}
	return string(b)
}
