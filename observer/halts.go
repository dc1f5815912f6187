package observer

import (
	"context"
	"fmt"
	"time"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/internal/db"
	"github.com/batchclaim/batchclaim/pgdb"
)

// Halt is a service_id stopped after an INVALID batch (RecorderConfig.HaltOnInvalid).
type Halt struct {
	ServiceID string    `json:"service_id"`
	Seq       int64     `json:"seq"` // the INVALID batch that halted it
	Reason    string    `json:"reason"`
	At        time.Time `json:"at"` // database clock
}

// Halts lists the halted service_ids, by service_id.
func Halts(ctx context.Context, q pgdb.Querier) ([]Halt, error) {
	rows, err := db.New().ServiceHalts(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("read halted services: %w", err)
	}
	out := make([]Halt, 0, len(rows))
	for _, r := range rows {
		out = append(out, Halt{ServiceID: r.ServiceID, Seq: r.Seq, Reason: r.Reason, At: r.At})
	}
	return out, nil
}

// Resume lifts the halt of serviceID: whichever instance holds its claim sends its next
// batch from its next cycle on. The INVALID batch stays INVALID. It returns the lifted halt,
// or batchclaim.ErrNotFound if serviceID was not halted.
func Resume(ctx context.Context, q pgdb.Querier, serviceID string) (Halt, error) {
	r, err := db.New().ServiceHaltDelete(ctx, q, serviceID)
	if err != nil {
		return Halt{}, fmt.Errorf("resume %q: %w", serviceID, pgdb.NotFound(err))
	}
	return Halt{ServiceID: r.ServiceID, Seq: r.Seq, Reason: r.Reason, At: r.At}, nil
}

// Change is a batch's state change made by Cancel or Retry, or a cancel requested.
type Change struct {
	Seq       int64            `json:"seq"`
	ServiceID string           `json:"service_id"`
	From      batchclaim.State `json:"from"`
	To        batchclaim.State `json:"to"`
	// Resumed: the retried batch was the one that halted its service_id, and the halt is
	// lifted.
	Resumed bool `json:"resumed,omitempty"`
	// CancelRequested: the cancelled batch is running (INFLIGHT, From and To): the instance
	// running it is asked to stop it, and its outcome makes it CANCELLED (see Cancel).
	CancelRequested bool `json:"cancel_requested,omitempty"`
}

// Retry runs the batch seq again. A DISCARDED, CANCELLED or INVALID batch becomes NEW and goes
// to the back of its service_id's queue, as if it were enqueued now (it waits for the batch
// in flight, if any, and for those stored before the retry); the INVALID batch that halts its
// service_id keeps its place and lifts the halt. Its attempts go on counting (an attempt
// number is never used twice for one batch); its attempt limit counts from the retry. A
// DELAYED batch becomes due now. Like an enqueue, Retry creates the service_id's claim row
// again if it was dropped as idle and wakes whoever holds the service_id when it commits; run
// inside a transaction, it holds the service_id's enqueue lock until that transaction ends
// (docs/jobs.md, "Retry"). A ledger may reject an INVALID batch again. Another state:
// batchclaim.ErrStateChanged; no such batch: batchclaim.ErrNotFound.
func Retry(ctx context.Context, q pgdb.Querier, seq int64) (Change, error) {
	r, err := db.New().BatchRetry(ctx, q, seq)
	if err != nil {
		return Change{}, fmt.Errorf("retry batch %d: %w", seq, whyNot(ctx, q, seq, err, "DISCARDED, CANCELLED, INVALID or DELAYED"))
	}
	return Change{Seq: r.Seq, ServiceID: r.ServiceID, From: batchclaim.State(r.FromState), To: batchclaim.State(r.ToState), Resumed: r.Resumed > 0}, nil
}

// whyNot explains a conditional write about batch seq that changed nothing: the batch does
// not exist (ErrNotFound) or is in another state than want (ErrStateChanged).
func whyNot(ctx context.Context, q pgdb.Querier, seq int64, err error, want string) error {
	if !pgdb.NoRows(err) {
		return err
	}
	b, err := db.New().BatchBySeq(ctx, q, seq)
	if err != nil {
		return pgdb.NotFound(err)
	}
	return fmt.Errorf("%w: it is %s, not %s", batchclaim.ErrStateChanged, b.State, want)
}
