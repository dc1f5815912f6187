package observer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/claims"
	"github.com/batchclaim/batchclaim/internal/db"
)

// Fencer is the part of claims.Engine the observer needs.
type Fencer interface {
	InstanceID() uuid.UUID
	Held() []claims.Claim
	BeginSubmission(ctx context.Context, q claims.Querier, c claims.Claim) error
	EndSubmission(ctx context.Context, q claims.Querier, c claims.Claim) error
	Fence(ctx context.Context, tx claims.Querier, c claims.Claim) error
	// WriteTx runs a guarded transaction, retried on lock timeouts, deadlocks and
	// serialization failures.
	WriteTx(ctx context.Context, fn func(pgx.Tx) error) error
}

// Pool starts transactions (a *pgxpool.Pool).
type Pool interface {
	claims.Querier
	Begin(ctx context.Context) (pgx.Tx, error)
}

// Transition is one recorded state change.
type Transition struct {
	Seq        int64
	ServiceID  string
	BatchID    string
	From, To   batchclaim.State
	AgeSeconds float64 // since the batch was stored (database clock)
}

// RecorderConfig configures a Recorder.
type RecorderConfig struct {
	// HaltOnInvalid halts a service_id when one of its batches is INVALID: nothing more is
	// sent for it until an operator deletes its service_halts row. False (the default) treats
	// INVALID as terminal for that batch only and goes on with the next.
	HaltOnInvalid bool
	// Events receives status changes.
	Events *Events
}

// Recorder makes the fenced, synchronous writes about batches.
type Recorder struct {
	pool  Pool
	fence Fencer
	cfg   RecorderConfig
	q     *db.Queries
}

// NewRecorder returns a Recorder.
func NewRecorder(pool Pool, fence Fencer, cfg RecorderConfig) *Recorder {
	return &Recorder{pool: pool, fence: fence, cfg: cfg, q: db.New()}
}

// Begin marks s's batch in flight (fenced, committed) and opens its attempt-log row.
func (r *Recorder) Begin(ctx context.Context, s batchclaim.Job) (attemptID int64, err error) {
	err = r.inTx(ctx, func(tx pgx.Tx) error {
		if err := r.fence.BeginSubmission(ctx, tx, s.Claim); err != nil {
			return err
		}
		me := r.fence.InstanceID()
		_, err := r.q.BatchMarkInflight(ctx, tx, db.BatchMarkInflightParams{
			Claimant: me, Epoch: s.Claim.Epoch, Seq: s.Batch.Seq, ExpectedState: string(s.FromState),
		})
		if errors.Is(err, pgx.ErrNoRows) {
			return batchclaim.ErrStateChanged
		}
		if err != nil {
			return fmt.Errorf("mark in flight: %w", err)
		}
		attemptID, err = r.q.AttemptStart(ctx, tx, db.AttemptStartParams{
			Seq: s.Batch.Seq, ServiceID: s.Batch.ServiceID, BatchID: s.Batch.BatchID,
			InstanceID: me, Epoch: s.Claim.Epoch, Reason: s.Reason,
		})
		if err != nil {
			return fmt.Errorf("log attempt: %w", err)
		}
		return r.logTransition(ctx, tx, s.Batch.Seq, s.FromState, batchclaim.StateInflight, s.Claim.Epoch, s.Reason)
	})
	return attemptID, err
}

// Finish records the outcome of s's submission (fenced) and ends the submission.
func (r *Recorder) Finish(ctx context.Context, s batchclaim.Job, attemptID int64, res batchclaim.Result, latency, nextAttempt time.Duration) error {
	to := res.Verdict.State()
	var age float64
	err := r.inTx(ctx, func(tx pgx.Tx) error {
		if err := r.fence.Fence(ctx, tx, s.Claim); err != nil {
			return err
		}
		var dltStatus *string
		switch res.Verdict {
		case batchclaim.Accepted:
			dltStatus = ptr(string(batchclaim.StatusPending))
		case batchclaim.Rejected:
			dltStatus = ptr(string(batchclaim.StatusInvalid))
		case batchclaim.Done:
			dltStatus = ptr(string(batchclaim.StatusCommitted))
		}
		var lastErr *string
		if res.Verdict != batchclaim.Accepted && res.Verdict != batchclaim.Done && res.Detail != "" {
			lastErr = ptr(res.Detail)
		}
		var err error
		age, err = r.q.BatchRecordOutcome(ctx, tx, db.BatchRecordOutcomeParams{
			NewState: string(to), DltStatus: dltStatus, RetryAfterMs: nextAttempt.Milliseconds(),
			LastError: lastErr, InvalidDetails: jsonOrNil(res.Invalid),
			Seq: s.Batch.Seq, Epoch: s.Claim.Epoch, Claimant: r.fence.InstanceID(),
		})
		if errors.Is(err, pgx.ErrNoRows) {
			return batchclaim.ErrStateChanged
		}
		if err != nil {
			return fmt.Errorf("record outcome: %w", err)
		}
		var status *int32
		if res.HTTPStatus != 0 {
			status = ptr(int32(res.HTTPStatus))
		}
		if err := r.q.AttemptFinish(ctx, tx, db.AttemptFinishParams{
			ID: attemptID, HttpStatus: status, LatencyMs: ptr(float64(latency.Microseconds()) / 1000),
			Outcome: ptr(res.Verdict.String()), Error: lastErr,
		}); err != nil {
			return fmt.Errorf("finish attempt: %w", err)
		}
		if err := r.logTransition(ctx, tx, s.Batch.Seq, batchclaim.StateInflight, to, s.Claim.Epoch, res.Verdict.String()); err != nil {
			return err
		}
		if to == batchclaim.StateInvalid && r.cfg.HaltOnInvalid {
			if err := r.q.ServiceHalt(ctx, tx, db.ServiceHaltParams{ServiceID: s.Batch.ServiceID, Seq: s.Batch.Seq, Reason: "batch INVALID: " + res.Detail}); err != nil {
				return fmt.Errorf("halt service: %w", err)
			}
		}
		return r.fence.EndSubmission(ctx, tx, s.Claim)
	})
	if err == nil {
		r.cfg.Events.statusChanged(Transition{Seq: s.Batch.Seq, ServiceID: s.Batch.ServiceID, BatchID: s.Batch.BatchID, From: batchclaim.StateInflight, To: to, AgeSeconds: age})
	}
	return err
}

// Adopt turns a batch left INFLIGHT (by a previous owner, or by this instance before it was
// fenced) into UNKNOWN under claim c, so that the ledger is asked before it is sent again. It
// also ends any submission mark c's own epoch left behind.
func (r *Recorder) Adopt(ctx context.Context, c claims.Claim, b batchclaim.Batch, detail string) error {
	return r.RecordStatuses(ctx, c, []StatusUpdate{{Seq: b.Seq, BatchID: b.BatchID, From: batchclaim.StateInflight,
		Status: batchclaim.StatusUnknown, Detail: detail, Adopted: true}}, true)
}

// StatusUpdate is one ledger answer to record.
type StatusUpdate struct {
	Seq     int64
	BatchID string
	From    batchclaim.State // the state the batch was in when the ledger was asked
	Status  batchclaim.Status
	Invalid []byte // JSON details of invalid transactions
	Detail  string
	// Adopted marks the UNKNOWN of an orphaned in-flight batch: no answer from the ledger, so
	// it does not count towards the consecutive UNKNOWN answers that allow a resubmission.
	Adopted bool
}

// RecordStatuses records ledger answers for batches of claim c's service_id, in one fenced
// transaction. Updates whose batch moved on meanwhile are skipped.
func (r *Recorder) RecordStatuses(ctx context.Context, c claims.Claim, ups []StatusUpdate, endSubmission bool) error {
	var changed []Transition
	err := r.inTx(ctx, func(tx pgx.Tx) error {
		changed = changed[:0]
		if err := r.fence.Fence(ctx, tx, c); err != nil {
			return err
		}
		for _, u := range ups {
			to := stateFor(u.Status)
			if to == u.From && u.Status != batchclaim.StatusUnknown {
				continue // nothing new; UNKNOWN is recorded to count consecutive answers
			}
			row, err := r.q.BatchRecordStatus(ctx, tx, db.BatchRecordStatusParams{
				NewState: string(to), DltStatus: string(u.Status), InvalidDetails: jsonOrNil(u.Invalid),
				Claimant: r.fence.InstanceID(), Epoch: c.Epoch, Seq: u.Seq, ExpectedState: string(u.From),
				Answer: !u.Adopted,
			})
			if errors.Is(err, pgx.ErrNoRows) {
				continue
			}
			if err != nil {
				return fmt.Errorf("record status: %w", err)
			}
			if to != u.From {
				if err := r.logTransition(ctx, tx, u.Seq, u.From, to, c.Epoch, cmpOr(u.Detail, "ledger: "+string(u.Status))); err != nil {
					return err
				}
				changed = append(changed, Transition{Seq: u.Seq, ServiceID: c.ServiceID, BatchID: u.BatchID, From: u.From, To: to, AgeSeconds: row.AgeSeconds})
			}
			if to == batchclaim.StateInvalid && r.cfg.HaltOnInvalid {
				if err := r.q.ServiceHalt(ctx, tx, db.ServiceHaltParams{ServiceID: c.ServiceID, Seq: u.Seq, Reason: "batch INVALID"}); err != nil {
					return fmt.Errorf("halt service: %w", err)
				}
			}
		}
		if endSubmission {
			if err := r.fence.EndSubmission(ctx, tx, c); err != nil && !errors.Is(err, batchclaim.ErrClaimLost) {
				return err
			}
		}
		return nil
	})
	if err == nil {
		for _, t := range changed {
			r.cfg.Events.statusChanged(t)
		}
	}
	return err
}

// stateFor maps a ledger status to the batch state it leads to.
func stateFor(s batchclaim.Status) batchclaim.State {
	switch s {
	case batchclaim.StatusCommitted:
		return batchclaim.StateCommitted
	case batchclaim.StatusInvalid:
		return batchclaim.StateInvalid
	case batchclaim.StatusValid:
		return batchclaim.StateValid
	case batchclaim.StatusPending:
		return batchclaim.StatePending
	}
	return batchclaim.StateUnknown
}

func (r *Recorder) logTransition(ctx context.Context, tx pgx.Tx, seq int64, from, to batchclaim.State, epoch int64, detail string) error {
	me := r.fence.InstanceID()
	f := string(from)
	if err := r.q.TransitionLog(ctx, tx, db.TransitionLogParams{
		Seq: seq, FromState: &f, ToState: string(to), InstanceID: &me, Epoch: &epoch, Detail: &detail,
	}); err != nil {
		return fmt.Errorf("log transition: %w", err)
	}
	return nil
}

func (r *Recorder) inTx(ctx context.Context, fn func(pgx.Tx) error) error {
	return r.fence.WriteTx(ctx, fn)
}

func ptr[T any](v T) *T { return &v }

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func jsonOrNil(b []byte) []byte {
	if len(b) == 0 || !json.Valid(b) {
		return nil
	}
	return b
}
