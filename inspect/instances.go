package inspect

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/batchclaim/batchclaim/internal/db"
	"github.com/batchclaim/batchclaim/pgdb"
)

// InstanceProgress is one registered instance's share of the work.
type InstanceProgress struct {
	ID        uuid.UUID `json:"id"`
	Name      string    `json:"name"`
	Claims    int64     `json:"claims"`    // service_ids it holds
	InFlight  int64     `json:"in_flight"` // batches it has INFLIGHT
	Committed int64     `json:"committed"` // batches it recorded COMMITTED, ever
}

// Instances reads the progress of every registered instance, by name.
func Instances(ctx context.Context, q pgdb.Querier) ([]InstanceProgress, error) {
	rows, err := db.New().InstanceProgress(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("read instances' progress: %w", err)
	}
	out := make([]InstanceProgress, 0, len(rows))
	for _, r := range rows {
		out = append(out, InstanceProgress{ID: r.ID, Name: r.Name, Claims: r.Claims, InFlight: r.InFlight, Committed: r.Committed})
	}
	return out, nil
}

// Now reads the database clock (clock_timestamp()), the clock claims and batches are
// stamped with: the since of TakeoverDelays.
func Now(ctx context.Context, q pgdb.Querier) (time.Time, error) {
	t, err := db.New().ClockNow(ctx, q)
	if err != nil {
		return time.Time{}, fmt.Errorf("read the database clock: %w", err)
	}
	return t, nil
}

// Takeovers counts the claims ever voided from their owner (claim_events voided_idle and
// voided_expired, docs/claims.md): each one let another instance take the service_id over.
func Takeovers(ctx context.Context, q pgdb.Querier) (int64, error) {
	n, err := db.New().TakeoverCount(ctx, q)
	if err != nil {
		return 0, fmt.Errorf("count takeovers: %w", err)
	}
	return n, nil
}

// TakeoverDelay is how long one service_id voided from an instance waited to be acquired
// again.
type TakeoverDelay struct {
	ServiceID string `json:"service_id"`
	// Event is why the claim was voided: voided_idle or voided_expired.
	Event string `json:"event"`
	// Seconds runs from the since given to TakeoverDelays until another epoch of the
	// service_id was acquired; -1 while none is.
	Seconds float64 `json:"seconds"`
}

// TakeoverDelays reads, for every claim voided from instance, the delay from since (when the
// instance failed, by the database clock: Now) until its service_id was acquired again.
func TakeoverDelays(ctx context.Context, q pgdb.Querier, instance uuid.UUID, since time.Time) ([]TakeoverDelay, error) {
	rows, err := db.New().TakeoverDelays(ctx, q, db.TakeoverDelaysParams{Since: since, InstanceID: instance})
	if err != nil {
		return nil, fmt.Errorf("read takeover delays: %w", err)
	}
	out := make([]TakeoverDelay, 0, len(rows))
	for _, r := range rows {
		out = append(out, TakeoverDelay{ServiceID: r.ServiceID, Event: r.Event, Seconds: r.Seconds})
	}
	return out, nil
}
