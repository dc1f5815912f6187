package heartbeat_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/batchclaim/batchclaim/patterns/heartbeat"
)

// Event types are added and removed while sources beat and steps run: heartbeats of a
// removed type are discarded, its open events are cleared (reason "removed"), it and its
// sources are deleted, and re-adding it continues its sources' episode numbers.
func TestReconfigurationAddsAndRemovesWhileRunning(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	b := setup(t, eventType("A", time.Second, 2), eventType("B", time.Second, 2))
	b.beat(t, "A", "a-1")
	b.beat(t, "A", "a-2")
	b.beat(t, "B", "b-1")
	b.age(t, "A", "a-1", 10*time.Second)
	if raised, _ := b.step(t, nil); len(raised) != 1 || raised[0].SourceName != "a-1" {
		t.Fatalf("raised %+v, want a-1", raised)
	}
	if _, err := heartbeat.Record(ctx, b.pool, heartbeat.Heartbeat{SourceName: "c-1", EventName: "C", LastEpochMicrosec: 1}); !errors.Is(err, heartbeat.ErrUnknownEventName) {
		t.Fatalf("heartbeat of an unconfigured type: err %v, want ErrUnknownEventName", err)
	}

	gen, err := heartbeat.Reconfigure(ctx, b.pool, []heartbeat.EventType{eventType("B", 2*time.Second, 3), eventType("C", time.Second, 1)})
	if err != nil {
		t.Fatal(err)
	}
	types, err := heartbeat.ListEventTypes(ctx, b.pool)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]heartbeat.EventType{}
	for _, ty := range types {
		got[ty.Name] = ty
	}
	if got["A"].Valid || !got["B"].Valid || got["B"].Interval != 2*time.Second || got["B"].MissedCount != 3 ||
		!got["C"].Valid || got["C"].Generation != gen || got["A"].Sources != 2 {
		t.Fatalf("after reconfiguration: %+v", types)
	}
	if _, err := heartbeat.Record(ctx, b.pool, heartbeat.Heartbeat{SourceName: "a-2", EventName: "A", LastEpochMicrosec: 1}); !errors.Is(err, heartbeat.ErrUnknownEventName) {
		t.Fatalf("heartbeat of a removed type: err %v, want ErrUnknownEventName", err)
	}
	b.beat(t, "C", "c-1")

	_, cleared, purged, err := heartbeat.Step(ctx, b.pool, noFence, b.id, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(cleared) != 1 || cleared[0].SourceName != "a-1" || cleared[0].Reason != heartbeat.ReasonRemoved || purged != 1 {
		t.Fatalf("step after removing A: cleared %+v, purged %d; want a-1 cleared as removed, 1 type purged", cleared, purged)
	}
	var left int
	if err := b.pool.QueryRow(ctx, "SELECT count(*) FROM batchclaim.heartbeat_sources WHERE event_name = 'A'").Scan(&left); err != nil || left != 0 {
		t.Fatalf("sources of the removed type left: %d (%v)", left, err)
	}

	// Re-added, A's source a-1 starts again; its next episode is 2, never 1 again.
	if err := heartbeat.AddEventType(ctx, b.pool, eventType("A", time.Second, 2)); err != nil {
		t.Fatal(err)
	}
	b.beat(t, "A", "a-1")
	b.age(t, "A", "a-1", 10*time.Second)
	raised, _ := b.step(t, nil)
	if len(raised) != 1 || raised[0].Episode != 2 {
		t.Fatalf("re-added type: raised %+v, want a-1 episode 2", raised)
	}

	// RemoveEventType alone, and a type made valid again before a step keeps its sources.
	if err := heartbeat.RemoveEventType(ctx, b.pool, "B"); err != nil {
		t.Fatal(err)
	}
	if err := heartbeat.AddEventType(ctx, b.pool, eventType("B", time.Second, 2)); err != nil {
		t.Fatal(err)
	}
	if _, _, purged, err := heartbeat.Step(ctx, b.pool, noFence, b.id, 1, nil); err != nil || purged != 0 {
		t.Fatalf("purged %d types (%v): B was valid again", purged, err)
	}
	if err := heartbeat.RemoveEventType(ctx, b.pool, "nope"); !errors.Is(err, heartbeat.ErrUnknownEventName) {
		t.Fatalf("remove unknown: %v", err)
	}
}

func TestReconfigurationRejectsBadEntriesAndChangesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t, eventType("A", time.Second, 2))
	for _, tc := range []struct {
		types []heartbeat.EventType
		want  string
	}{
		{[]heartbeat.EventType{eventType("", time.Second, 1)}, "empty eventName"},
		{[]heartbeat.EventType{eventType("X", 0, 1)}, "interval 0s"},
		{[]heartbeat.EventType{eventType("X", time.Second, 0)}, "missedCount 0"},
		{[]heartbeat.EventType{eventType("X", time.Second, 1), eventType("X", time.Second, 2)}, "listed twice"},
	} {
		if _, err := heartbeat.Reconfigure(t.Context(), b.pool, tc.types); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Reconfigure(%v): err %v, want %q", tc.types, err, tc.want)
		}
	}
	types, err := heartbeat.ListEventTypes(t.Context(), b.pool)
	if err != nil || len(types) != 1 || !types[0].Valid {
		t.Fatalf("configuration after rejected reconfigurations: %+v, %v", types, err)
	}
}
