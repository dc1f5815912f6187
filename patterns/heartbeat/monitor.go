package heartbeat

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/batchclaim/batchclaim/internal/db"
	"github.com/batchclaim/batchclaim/pgdb"
)

// fencer is the part of the election the active instance's writes need: Fence makes the
// caller's transaction conditional on still being the primary of role (an error wrapping
// batchclaim.ErrClaimLost otherwise).
type fencer interface {
	Fence(ctx context.Context, tx pgdb.Querier, role string) error
}

// writer names the active instance in the events it writes.
type writer struct {
	instanceID uuid.UUID
	epoch      int64
}

// monitor is the design's DB monitoring process: one step raises, clears and cleans up.
type monitor struct {
	pool      pgdb.Beginner
	fence     fencer
	role      string
	txTimeout time.Duration
}

// stepResult is what one step wrote.
type stepResult struct {
	Raised, Cleared []Event // Cleared includes clears of removed event types
	Purged          int64   // invalid event types deleted
}

// step runs one monitoring step in one transaction fenced by the election, so that an
// instance that is no longer active can write nothing:
//
//  1. clear the open events of sources whose event type was removed, and delete the removed
//     types with their sources (the design's validity-flag clean-up);
//  2. clear every raised source that sent a heartbeat since its raise;
//  3. raise every source that is not raised and whose last heartbeat is MissedCount
//     intervals old by the database's clock (now, or the optional now a test passes), or
//     that has a late silence (one that ended before any step saw it);
//  4. clear again: a late silence is raised and cleared in the same step.
//
// A source that beat once after its raise and fell silent again has its old episode
// cleared in 2 and its new one raised in 3.
func (m *monitor) step(ctx context.Context, w writer, now *time.Time) (stepResult, error) {
	var res stepResult
	ctx, cancel := context.WithTimeout(ctx, m.txTimeout)
	defer cancel()
	err := pgdb.InTx(ctx, m.pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
		res = stepResult{}
		if err := pgdb.GuardTx(ctx, tx, m.txTimeout, max(m.txTimeout/5, 200*time.Millisecond)); err != nil {
			return err
		}
		if err := m.fence.Fence(ctx, tx, m.role); err != nil {
			return err
		}
		q := db.New()
		removed, err := q.HeartbeatClearRemoved(ctx, tx, db.HeartbeatClearRemovedParams{InstanceID: w.instanceID, TermEpoch: w.epoch})
		if err != nil {
			return fmt.Errorf("clear removed: %w", err)
		}
		if res.Purged, err = q.HeartbeatEventTypesPurge(ctx, tx); err != nil {
			return fmt.Errorf("purge removed event types: %w", err)
		}
		cleared, err := q.HeartbeatClearFresh(ctx, tx, db.HeartbeatClearFreshParams{InstanceID: w.instanceID, TermEpoch: w.epoch})
		if err != nil {
			return fmt.Errorf("clear: %w", err)
		}
		raised, err := q.HeartbeatRaiseDue(ctx, tx, db.HeartbeatRaiseDueParams{Now: now, InstanceID: w.instanceID, TermEpoch: w.epoch})
		if err != nil {
			return fmt.Errorf("raise: %w", err)
		}
		late, err := q.HeartbeatClearFresh(ctx, tx, db.HeartbeatClearFreshParams{InstanceID: w.instanceID, TermEpoch: w.epoch})
		if err != nil {
			return fmt.Errorf("clear late: %w", err)
		}
		cleared = append(cleared, late...)
		if res.Cleared, err = eventsFromRows(append(removed, cleared...)); err != nil {
			return err
		}
		res.Raised, err = eventsFromRows(raised)
		return err
	})
	if err != nil {
		return stepResult{}, fmt.Errorf("monitor step: %w", err)
	}
	return res, nil
}
