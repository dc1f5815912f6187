package main

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/batchclaim/batchclaim/internal/dbtest"
	"github.com/batchclaim/batchclaim/patterns/heartbeat"
)

// `heartbeat demo --json`: three instance processes, the active one SIGKILLed, sources that
// stop and resume, an event type added and one removed; every invariant counter is 0 and the
// run exercised what it claims.
func TestHeartbeatDemoJSON(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	cmd := exec.Command(bin, "heartbeat", "demo", "--json")
	cmd.Env = append(cmd.Environ(), "DATABASE_URL="+dbtest.AdminURL(t))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("heartbeat demo: %v\nstderr:\n%s\nstdout:\n%s", err, stderr.String(), stdout.String())
	}
	var sum map[string]any
	if err := json.Unmarshal(stdout.Bytes(), &sum); err != nil {
		t.Fatalf("stdout is not one JSON object: %v\n%s", err, stdout.String())
	}
	for _, k := range []string{"lost_raises", "duplicate_raises", "lost_clears", "raised_by_standby", "spurious_raises", "undelivered"} {
		v, ok := sum[k]
		if !ok || v != 0.0 {
			t.Errorf("%s = %v, want 0", k, v)
		}
	}
	// 11 planned silences (one never ends, one of a type added while running, one of a type
	// removed while it is raised); more if the machine paused a source.
	if sum["silences"].(float64) < 11 || sum["raises"] != sum["silences"] || sum["clears_of_removed_type"] != 1.0 ||
		sum["terms"].(float64) < 2 || sum["webhook_refused"].(float64) == 0 || len(sum["faults"].([]any)) != 3 {
		t.Fatalf("the run did not exercise what it should: %s", stdout.String())
	}
	if !strings.Contains(stderr.String(), "SIGKILL hb-") {
		t.Fatalf("the story did not go to stderr:\n%s", stderr.String())
	}
}

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

// `heartbeat event-types` changes the configuration from the command line.
func TestHeartbeatEventTypesCommand(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDB(t)
	run := func(want int, args ...string) string {
		t.Helper()
		var out, errb bytes.Buffer
		if code := realMain(t.Context(), append([]string{"heartbeat", "event-types", "--database-url", dbURL}, args...), &out, &errb); code != want {
			t.Fatalf("%v: exit %d, want %d\n%s%s", args, code, want, out.String(), errb.String())
		}
		return out.String() + errb.String()
	}
	file := t.TempDir() + "/types.json"
	if err := writeFile(file, []byte(`[{"eventName": "Heartbeat_vDNS", "interval": "60s", "missedCount": 3}]`)); err != nil {
		t.Fatal(err)
	}
	if out := run(0, "set", file); !strings.Contains(out, "1 event types") {
		t.Fatalf("set: %q", out)
	}
	run(0, "add", "--name", "Heartbeat_vFW", "--interval", "30s", "--missed-count", "2")
	run(0, "remove", "Heartbeat_vDNS")
	out := run(0, "show")
	if !strings.Contains(out, "Heartbeat_vDNS  1m0s") || !strings.Contains(out, "false") || !strings.Contains(out, "Heartbeat_vFW") {
		t.Fatalf("show: %q", out)
	}
	if out := run(1, "add", "--name", "bad", "--interval", "30s"); !strings.Contains(out, "missedCount 0") {
		t.Fatalf("add without missed count: %q", out)
	}
	if out := run(1, "remove", "nope"); !strings.Contains(out, "unknown event name") {
		t.Fatalf("remove unknown: %q", out)
	}
}
