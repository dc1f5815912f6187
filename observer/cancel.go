package observer

import (
	"context"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/internal/db"
	"github.com/batchclaim/batchclaim/pgdb"
)

// Cancel cancels the batch seq, with reason kept as its last error and in its history.
//
//   - NEW (with a run-at time ahead or not) or DELAYED (its last attempt certainly not
//     taken): it becomes CANCELLED at once, and its service_id goes on with the next batch.
//   - INFLIGHT (running): the cancel is requested for the attempt that runs, and the instance
//     running it is woken (NOTIFY; it also looks every renew interval), which cancels the
//     job's context with a cause that wraps batchclaim.ErrCancelled. The batch stays INFLIGHT
//     until the job returns; its outcome then makes it CANCELLED, unless the job returned
//     Done (COMMITTED: its effect took place, and a CANCELLED would hide it) or, on a ledger,
//     Accepted or Unknown (the ledger may still commit it). The Change says CancelRequested.
//   - UNKNOWN: refused (batchclaim.ErrStateChanged, ErrOutcomeUnknown): its last attempt may
//     have taken effect, or a ledger may still take it; cancelling it would let the next
//     batch of its service_id go while it still might.
//   - Another state (finished, or PENDING or VALID on a ledger): batchclaim.ErrStateChanged;
//     no such batch: batchclaim.ErrNotFound.
//
// The write is conditional on the state, not fenced on a claim: if the batch's owner marks it
// in flight first, the cancel becomes a request to the running job; if its outcome is
// recorded first, the cancel acts on the state that outcome left.
//
// reason is at most MaxCancelReason bytes of UTF-8 (an error otherwise, nothing changed).
func Cancel(ctx context.Context, q pgdb.Querier, seq int64, reason string) (Change, error) {
	switch {
	case !utf8.ValidString(reason):
		return Change{}, fmt.Errorf("cancel batch %d: the reason is not valid UTF-8", seq)
	case len(reason) > MaxCancelReason:
		return Change{}, fmt.Errorf("cancel batch %d: the reason is %d bytes, at most %d", seq, len(reason), MaxCancelReason)
	}
	r, err := db.New().BatchCancel(ctx, q, db.BatchCancelParams{Seq: seq, Detail: reason})
	if err != nil {
		return Change{}, fmt.Errorf("cancel batch %d: %w", seq, cancelRefused(ctx, q, seq, err))
	}
	return Change{Seq: r.Seq, ServiceID: r.ServiceID, From: batchclaim.State(r.FromState), To: batchclaim.State(r.ToState),
		CancelRequested: r.Requested}, nil
}

// MaxCancelReason bounds Cancel's reason, in bytes. The reason is kept as the job's last
// error and in its history of changes, and shown on the status page.
const MaxCancelReason = 1000

// ErrOutcomeUnknown is why Cancel refuses an UNKNOWN batch (with batchclaim.ErrStateChanged):
// its last attempt's outcome is unknown, it may have taken effect or (on a ledger) still
// take effect, so its service_id cannot go on without it. It can be cancelled once it runs
// again (INFLIGHT) or is DELAYED.
var ErrOutcomeUnknown = errors.New("its last attempt's outcome is unknown: it may have taken effect, or may still, so it cannot be cancelled safely; cancel it when it runs again")

// CancelRequest is a cancel requested for a job an instance runs (see Cancel).
type CancelRequest struct {
	Seq     int64
	Attempt int // the attempt the request is for (Batch.Attempts + 1 of the running call)
	Reason  string
}

// CancelRequests returns the cancel requests against the jobs in running (seq -> attempt
// number) that instance runs: each still INFLIGHT under it at the attempt that runs. It reads
// one row per job, by its primary key; an empty running reads nothing.
func CancelRequests(ctx context.Context, q pgdb.Querier, instance uuid.UUID, running map[int64]int) ([]CancelRequest, error) {
	if len(running) == 0 {
		return nil, nil
	}
	seqs := make([]int64, 0, len(running))
	for seq := range running {
		seqs = append(seqs, seq)
	}
	rows, err := db.New().BatchesCancelRequested(ctx, q, db.BatchesCancelRequestedParams{Seqs: seqs, Claimant: instance})
	if err != nil {
		return nil, fmt.Errorf("read cancel requests: %w", err)
	}
	out := make([]CancelRequest, 0, len(rows))
	for _, r := range rows {
		if running[r.Seq] == int(r.Attempts) {
			out = append(out, CancelRequest{Seq: r.Seq, Attempt: int(r.Attempts), Reason: r.Reason})
		}
	}
	return out, nil
}

// cancelRefused explains a cancel that changed nothing: whyNot, with the reason an UNKNOWN
// batch is refused.
func cancelRefused(ctx context.Context, q pgdb.Querier, seq int64, err error) error {
	err = whyNot(ctx, q, seq, err, "NEW, DELAYED or INFLIGHT")
	if !errors.Is(err, batchclaim.ErrStateChanged) {
		return err
	}
	if b, rerr := db.New().BatchBySeq(ctx, q, seq); rerr == nil && batchclaim.State(b.State) == batchclaim.StateUnknown {
		return fmt.Errorf("%w: it is UNKNOWN: %w", batchclaim.ErrStateChanged, ErrOutcomeUnknown)
	}
	return err
}
