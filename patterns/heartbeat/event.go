package heartbeat

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/batchclaim/batchclaim/internal/db"
	"github.com/batchclaim/batchclaim/pgdb"
)

// Kind says whether an event raises or clears a source's missed-heartbeat condition.
type Kind string

const (
	// Raised: the source missed MissedCount consecutive heartbeats (ONSET).
	Raised Kind = "raised"
	// Cleared: a fresh heartbeat arrived after the raise, or the event type was removed
	// (ABATED).
	Cleared Kind = "cleared"
)

// Reasons an event was written.
const (
	ReasonMissed    = "missed"    // raised: K consecutive intervals without a heartbeat
	ReasonHeartbeat = "heartbeat" // cleared: a heartbeat arrived after the raise
	ReasonRemoved   = "removed"   // cleared: a reconfiguration removed the event type
)

// Event is one stored control-loop event. Its JSON form is what the webhook receives.
type Event struct {
	ID         int64  `json:"id"`
	Kind       Kind   `json:"kind"`
	Reason     string `json:"reason"`
	EventName  string `json:"eventName"`
	SourceName string `json:"sourceName"`
	// Episode numbers a source's raise/clear pairs: 1, 2, ... Each episode is raised once
	// and cleared at most once.
	Episode int64 `json:"episode"`
	// ClosedLoopEventStatus is ONSET for a raise, ABATED for a clear.
	ClosedLoopEventStatus string `json:"closedLoopEventStatus"`
	// The source when the event was written: the database time of its last heartbeat, the
	// source's own lastEpochMicrosec in it, and the number of heartbeats it had sent.
	LastReceivedAt    time.Time     `json:"lastReceivedAt"`
	LastEpochMicrosec int64         `json:"lastEpochMicrosec"`
	HeartbeatSeq      int64         `json:"heartbeatSeq"`
	Interval          time.Duration `json:"intervalNanos"`
	MissedCount       int           `json:"missedCount"`
	ControlLoop       ControlLoop   `json:"controlLoop"`
	// The active instance that wrote it, its election epoch, and when (database clock).
	InstanceID uuid.UUID `json:"instanceId"`
	TermEpoch  int64     `json:"termEpoch"`
	WrittenAt  time.Time `json:"writtenAt"`
	// Delivery: when the hook and webhook both took it (nil: not yet), and the attempts.
	DeliveredAt *time.Time `json:"deliveredAt,omitempty"`
	Attempts    int        `json:"attempts"`
	LastError   string     `json:"lastError,omitempty"`
}

// Key names the event stably across deliveries: the webhook's Idempotency-Key.
func (e Event) Key() string {
	return fmt.Sprintf("%s/%s/%d/%s", e.EventName, e.SourceName, e.Episode, e.Kind)
}

func eventFromRow(r db.HeartbeatEvent) (Event, error) {
	e := Event{
		ID: r.ID, Kind: Kind(r.Kind), Reason: r.Reason, EventName: r.EventName, SourceName: r.SourceName,
		Episode: r.Episode, LastReceivedAt: r.LastReceivedAt, LastEpochMicrosec: r.LastEpochMicrosec,
		HeartbeatSeq: r.HeartbeatSeq, Interval: time.Duration(r.IntervalMs) * time.Millisecond,
		MissedCount: int(r.MissedCount), InstanceID: r.InstanceID, TermEpoch: r.TermEpoch, WrittenAt: r.WrittenAt,
		DeliveredAt: r.DeliveredAt, Attempts: int(r.Attempts), LastError: r.LastError,
		ClosedLoopEventStatus: "ONSET",
	}
	if e.Kind == Cleared {
		e.ClosedLoopEventStatus = "ABATED"
	}
	if err := json.Unmarshal(r.ControlLoop, &e.ControlLoop); err != nil {
		return Event{}, fmt.Errorf("event %d: control loop fields: %w", r.ID, err)
	}
	return e, nil
}

func eventsFromRows(rows []db.HeartbeatEvent) ([]Event, error) {
	out := make([]Event, 0, len(rows))
	for _, r := range rows {
		e, err := eventFromRow(r)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

// ListEvents returns up to limit stored events with an id above afterID, in id order.
func ListEvents(ctx context.Context, q pgdb.Querier, afterID int64, limit int) ([]Event, error) {
	rows, err := db.New().HeartbeatEventList(ctx, q, db.HeartbeatEventListParams{AfterID: afterID, MaxEvents: int32(limit)})
	if err != nil {
		return nil, fmt.Errorf("list events: %w", err)
	}
	return eventsFromRows(rows)
}

// PendingDeliveries counts stored events not yet delivered.
func PendingDeliveries(ctx context.Context, q pgdb.Querier) (int64, error) {
	n, err := db.New().HeartbeatOutboxPending(ctx, q)
	if err != nil {
		return 0, fmt.Errorf("count undelivered events: %w", err)
	}
	return n, nil
}
