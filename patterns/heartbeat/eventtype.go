package heartbeat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/batchclaim/batchclaim/internal/db"
	"github.com/batchclaim/batchclaim/pgdb"
)

// ErrUnknownEventName reports a heartbeat whose eventName is not a valid configured event
// type: the heartbeat is discarded, as the design's worker discards it.
var ErrUnknownEventName = errors.New("unknown event name")

// ControlLoop holds the policy fields of an event type that every control-loop event of it
// carries (the names are the ONAP control-loop event's).
type ControlLoop struct {
	PolicyVersion         string `json:"policyVersion,omitempty"`
	PolicyName            string `json:"policyName,omitempty"`
	PolicyScope           string `json:"policyScope,omitempty"`
	TargetType            string `json:"target_type,omitempty"`
	Target                string `json:"target,omitempty"`
	ClosedLoopControlName string `json:"closedLoopControlName,omitempty"`
	Version               string `json:"version,omitempty"`
}

// EventType is one configured eventName: its sources must send a heartbeat every Interval,
// and MissedCount consecutive misses raise a control-loop event.
type EventType struct {
	Name        string        `json:"eventName"`
	Interval    time.Duration `json:"-"`
	MissedCount int           `json:"missedCount"`
	ControlLoop ControlLoop   `json:"controlLoop"`

	// Read back only (ListEventTypes): the validity flag, the configuration generation that
	// last wrote the type, and the number of sources seen.
	Valid      bool  `json:"valid"`
	Generation int64 `json:"generation"`
	Sources    int64 `json:"sources"`
}

// eventTypeJSON is EventType on the wire: the interval as a Go duration string ("1s").
type eventTypeJSON struct {
	Name        string      `json:"eventName"`
	Interval    string      `json:"interval"`
	MissedCount int         `json:"missedCount"`
	ControlLoop ControlLoop `json:"controlLoop"`
	Valid       bool        `json:"valid"`
	Generation  int64       `json:"generation"`
	Sources     int64       `json:"sources"`
}

// MarshalJSON writes the interval as a duration string.
func (t EventType) MarshalJSON() ([]byte, error) {
	return json.Marshal(eventTypeJSON{t.Name, t.Interval.String(), t.MissedCount, t.ControlLoop, t.Valid, t.Generation, t.Sources})
}

// UnmarshalJSON reads the interval as a duration string ("30s").
func (t *EventType) UnmarshalJSON(b []byte) error {
	var j eventTypeJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	d, err := time.ParseDuration(j.Interval)
	if err != nil && j.Interval != "" {
		return fmt.Errorf("event type %q: interval %q: %w", j.Name, j.Interval, err)
	}
	*t = EventType{j.Name, d, j.MissedCount, j.ControlLoop, j.Valid, j.Generation, j.Sources}
	return nil
}

// Validate reports what is wrong with t as a configuration entry.
func (t EventType) Validate() error {
	switch {
	case t.Name == "":
		return errors.New("event type: empty eventName")
	case t.Interval < time.Millisecond:
		return fmt.Errorf("event type %q: interval %s: want at least 1ms", t.Name, t.Interval)
	case t.MissedCount < 1:
		return fmt.Errorf("event type %q: missedCount %d: want at least 1", t.Name, t.MissedCount)
	}
	return nil
}

// Reconfigure replaces the whole configuration with types, the design's reconfiguration
// procedure in one transaction: every entry is marked invalid, each entry of types is written
// and marked valid again. Heartbeats of an event type left invalid are discarded from the
// commit on; the active instance then clears the open events of its sources and deletes it.
// It returns the new configuration generation. pool is the pgdb.DB of the instances, as for
// every function of this package that takes a pgdb.Beginner or a pgdb.Querier (a Querier
// may also be a transaction of the caller's moved into the DB's schema by DB.In).
func Reconfigure(ctx context.Context, pool pgdb.Beginner, types []EventType) (int64, error) {
	seen := map[string]bool{}
	for _, t := range types {
		if err := t.Validate(); err != nil {
			return 0, err
		}
		if seen[t.Name] {
			return 0, fmt.Errorf("event type %q: listed twice", t.Name)
		}
		seen[t.Name] = true
	}
	var gen int64
	err := pgdb.InTx(ctx, pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
		q := db.New()
		var err error
		if gen, err = q.HeartbeatConfigBump(ctx, tx); err != nil {
			return err
		}
		if _, err := q.HeartbeatEventTypesInvalidateAll(ctx, tx); err != nil {
			return err
		}
		for _, t := range types {
			if err := upsertEventType(ctx, tx, t, gen); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("reconfigure: %w", err)
	}
	return gen, nil
}

// AddEventType adds t to the configuration, or replaces the entry of the same name, and
// marks it valid, leaving the other entries as they are.
func AddEventType(ctx context.Context, pool pgdb.Beginner, t EventType) error {
	if err := t.Validate(); err != nil {
		return err
	}
	err := pgdb.InTx(ctx, pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
		gen, err := db.New().HeartbeatConfigBump(ctx, tx)
		if err != nil {
			return err
		}
		return upsertEventType(ctx, tx, t, gen)
	})
	if err != nil {
		return fmt.Errorf("add event type %s: %w", t.Name, err)
	}
	return nil
}

// RemoveEventType marks the entry name invalid: its heartbeats are discarded from now on and
// the active instance clears its sources' open events and deletes it. It returns
// ErrUnknownEventName if there is no valid entry of that name.
func RemoveEventType(ctx context.Context, pool pgdb.Beginner, name string) error {
	err := pgdb.InTx(ctx, pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
		q := db.New()
		gen, err := q.HeartbeatConfigBump(ctx, tx)
		if err != nil {
			return err
		}
		n, err := q.HeartbeatEventTypeInvalidate(ctx, tx, db.HeartbeatEventTypeInvalidateParams{Generation: gen, EventName: name})
		if err == nil && n == 0 {
			err = ErrUnknownEventName
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("remove event type %s: %w", name, err)
	}
	return nil
}

// ListEventTypes returns the configuration as stored, invalid entries not yet deleted
// included.
func ListEventTypes(ctx context.Context, q pgdb.Querier) ([]EventType, error) {
	rows, err := db.New().HeartbeatEventTypeList(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("list event types: %w", err)
	}
	out := make([]EventType, 0, len(rows))
	for _, r := range rows {
		t := EventType{Name: r.EventName, Interval: time.Duration(r.IntervalMs) * time.Millisecond, MissedCount: int(r.MissedCount),
			Valid: r.Valid, Generation: r.Generation, Sources: r.Sources}
		if err := json.Unmarshal(r.ControlLoop, &t.ControlLoop); err != nil {
			return nil, fmt.Errorf("event type %s: control loop fields: %w", r.EventName, err)
		}
		out = append(out, t)
	}
	return out, nil
}

func upsertEventType(ctx context.Context, tx pgx.Tx, t EventType, gen int64) error {
	cl, err := json.Marshal(t.ControlLoop)
	if err != nil {
		return err
	}
	return db.New().HeartbeatEventTypeUpsert(ctx, tx, db.HeartbeatEventTypeUpsertParams{
		EventName: t.Name, IntervalMs: t.Interval.Milliseconds(), MissedCount: int32(t.MissedCount),
		ControlLoop: cl, Generation: gen,
	})
}
