package heartbeatcmd

import (
	"testing"
	"time"

	"github.com/batchclaim/batchclaim/patterns/heartbeat"
)

// The demo's checker counts what it must: a pause with no raise, two raises for one pause, a
// raise whose source beat again but was never cleared, a raise for a short pause.
func TestHeartbeatCheckCountsViolations(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	s := &hbDemoSource{name: "s", event: "E", interval: 200 * time.Millisecond, missed: 3} // K intervals: 600ms
	beats := []heartbeat.Receipt{{Seq: 1, ReceivedAt: ms(0)}, {Seq: 2, ReceivedAt: ms(100)}, {Seq: 3, ReceivedAt: ms(1000)},
		{Seq: 4, ReceivedAt: ms(1100)}, {Seq: 5, ReceivedAt: ms(2000)}, {Seq: 6, ReceivedAt: ms(2100)}}
	ev := func(kind heartbeat.Kind, episode, seq int64, at int) heartbeat.Event {
		return heartbeat.Event{Kind: kind, Reason: heartbeat.ReasonMissed, EventName: "E", SourceName: "s", Episode: episode, HeartbeatSeq: seq, WrittenAt: ms(at)}
	}
	events := []heartbeat.Event{
		ev(heartbeat.Raised, 1, 1, 50), ev(heartbeat.Cleared, 1, 2, 120), // a pause of 100ms, raised
		// the pause after heartbeat 2 (900ms) is not raised
		ev(heartbeat.Raised, 2, 4, 1500), ev(heartbeat.Cleared, 2, 5, 2050), // the pause after 4, raised ...
		ev(heartbeat.Raised, 3, 4, 1600), // ... twice, and the second never cleared
	}
	d := &hbDemo{}
	d.checkSource(s, beats, events, ms(2200))
	got := [4]int{d.sum.LostRaises, d.sum.DuplicateRaises, d.sum.LostClears, d.sum.SpuriousRaises}
	if got != [4]int{1, 1, 1, 1} {
		t.Fatalf("lost, duplicate, lost clears, spurious = %v, want 1 each; problems %q", got, d.sum.Problems)
	}
	if d.sum.Silences != 2 {
		t.Fatalf("silences %d, want 2", d.sum.Silences)
	}

	clean := &hbDemo{}
	clean.checkSource(s, beats, []heartbeat.Event{ev(heartbeat.Raised, 1, 2, 500), ev(heartbeat.Cleared, 1, 3, 1050),
		ev(heartbeat.Raised, 2, 4, 1500), ev(heartbeat.Cleared, 2, 5, 2050),
		ev(heartbeat.Raised, 3, 6, 2150)}, ms(2200)) // the last pause has no end yet: not spurious
	if clean.sum.violations() != 0 {
		t.Fatalf("a correct history counted as violations: %+v", clean.sum)
	}
}
