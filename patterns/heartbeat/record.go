package heartbeat

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/batchclaim/batchclaim/internal/db"
	"github.com/batchclaim/batchclaim/pgdb"
)

// Heartbeat is what a monitored source sends: the ONAP heartbeat event's commonEventHeader
// fields that matter here.
type Heartbeat struct {
	SourceName string `json:"sourceName"`
	EventName  string `json:"eventName"`
	// LastEpochMicrosec is the source's own clock (microseconds since the Unix epoch). It is
	// stored and passed on in events, never compared with anything.
	LastEpochMicrosec int64 `json:"lastEpochMicrosec"`
}

// Validate reports a heartbeat that cannot be stored.
func (h Heartbeat) Validate() error {
	switch {
	case h.SourceName == "":
		return errors.New("sourceName is empty")
	case h.EventName == "":
		return errors.New("eventName is empty")
	case h.LastEpochMicrosec <= 0:
		return fmt.Errorf("lastEpochMicrosec is %d: want the source's time in microseconds since the Unix epoch", h.LastEpochMicrosec)
	}
	return nil
}

// Receipt says what storing a heartbeat did.
type Receipt struct {
	// ReceivedAt is the database's clock when the heartbeat was stored: the time miss
	// detection counts from.
	ReceivedAt time.Time `json:"receivedAt"`
	// Seq numbers the source's heartbeats: 1 for its first.
	Seq int64 `json:"seq"`
	// Raised reports that the source's latest episode was raised and not yet cleared when
	// this heartbeat was stored (the active instance clears it on its next step).
	Raised  bool  `json:"raised"`
	Episode int64 `json:"episode"`
}

// Record stores a heartbeat. Any instance, active or standby, may call it (so may any
// process with the database): a heartbeat only updates the source's row; raising and
// clearing are the active instance's. It returns ErrUnknownEventName when the eventName is
// not a valid configured event type. q is the pgdb.DB of the instances (or a transaction of
// the caller's moved into its schema by DB.In).
func Record(ctx context.Context, q pgdb.Querier, h Heartbeat) (Receipt, error) {
	if err := h.Validate(); err != nil {
		return Receipt{}, fmt.Errorf("record heartbeat: %w", err)
	}
	r, err := db.New().HeartbeatRecord(ctx, q, db.HeartbeatRecordParams{
		SourceName: h.SourceName, LastEpochMicrosec: h.LastEpochMicrosec, EventName: h.EventName,
	})
	if pgdb.NoRows(err) || isForeignKeyViolation(err) {
		// No valid type of that name, or it was deleted between the read and the write.
		return Receipt{}, fmt.Errorf("record heartbeat %s/%s: %w", h.EventName, h.SourceName, ErrUnknownEventName)
	}
	if err != nil {
		return Receipt{}, fmt.Errorf("record heartbeat %s/%s: %w", h.EventName, h.SourceName, err)
	}
	return Receipt{ReceivedAt: r.ReceivedAt, Seq: r.Heartbeats, Raised: r.Raised, Episode: r.Episodes}, nil
}

func isForeignKeyViolation(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23503"
}
