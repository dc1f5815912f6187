package heartbeat_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batchclaim/batchclaim/patterns/heartbeat"
	"github.com/batchclaim/batchclaim/pgdb"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
)

// noFence lets every step through: for tests of the step alone (the election's fence is
// tested with real Services).
var noFence = heartbeat.FenceFunc(func(context.Context, pgdb.Querier, string) error { return nil })

// bundle is what setup returns besides the pool.
type bundle struct {
	pool *pgxpool.Pool
	id   uuid.UUID // the writer's instance id in steps
}

func setup(t *testing.T, types ...heartbeat.EventType) bundle {
	t.Helper()
	pool := dbtest.NewPool(t)
	if len(types) > 0 {
		if _, err := heartbeat.Reconfigure(t.Context(), pool, types); err != nil {
			t.Fatal(err)
		}
	}
	return bundle{pool: pool, id: uuid.New()}
}

func eventType(name string, interval time.Duration, missed int) heartbeat.EventType {
	return heartbeat.EventType{Name: name, Interval: interval, MissedCount: missed,
		ControlLoop: heartbeat.ControlLoop{PolicyName: name + "-policy", ClosedLoopControlName: "CL-" + name}}
}

func (b bundle) beat(t *testing.T, event, source string) heartbeat.Receipt {
	t.Helper()
	r, err := heartbeat.Record(t.Context(), b.pool, heartbeat.Heartbeat{SourceName: source, EventName: event,
		LastEpochMicrosec: time.Now().UnixMicro()})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// step runs one step with the writer (b.id, epoch 1) at the database time now (nil: now()).
func (b bundle) step(t *testing.T, now *time.Time) (raised, cleared []heartbeat.Event) {
	t.Helper()
	raised, cleared, _, err := heartbeat.Step(t.Context(), b.pool, noFence, b.id, 1, now)
	if err != nil {
		t.Fatal(err)
	}
	return raised, cleared
}

// age moves a source's last heartbeat d into the past: the database's view of time moved
// forward for that source, without sleeping.
func (b bundle) age(t *testing.T, event, source string, d time.Duration) {
	t.Helper()
	tag, err := b.pool.Exec(t.Context(), "UPDATE batchclaim.heartbeat_sources SET received_at = received_at - $3::bigint * interval '1 microsecond' WHERE event_name = $1 AND source_name = $2",
		event, source, d.Microseconds())
	if err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("age %s/%s: %v (%d rows)", event, source, err, tag.RowsAffected())
	}
}

func (b bundle) events(t *testing.T) []heartbeat.Event {
	t.Helper()
	es, err := heartbeat.ListEvents(t.Context(), b.pool, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	return es
}

func at(t time.Time) *time.Time { return &t }
