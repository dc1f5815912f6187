package main

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"

	"github.com/batchclaim/batchclaim/cmd/batchclaim/internal/testbin"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
)

// `heartbeat demo --json`: three instance processes, the active one SIGKILLed, sources that
// stop and resume, an event type added and one removed; every invariant counter is 0 and the
// run exercised what it claims.
func TestHeartbeatDemoJSON(t *testing.T) {
	t.Parallel()
	bin := testbin.Path(t)
	cmd := exec.Command(bin, "heartbeat", "demo", "--json", "--schema", "ha") // no batchclaim schema in its database
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

// `heartbeat event-types` changes the configuration from the command line, in the default
// schema and in another one (--schema).
func TestHeartbeatEventTypesCommand(t *testing.T) {
	t.Parallel()
	for _, schema := range []string{"", "ha"} {
		t.Run("schema "+schema, func(t *testing.T) {
			t.Parallel()
			testHeartbeatEventTypes(t, schema)
		})
	}
}

func testHeartbeatEventTypes(t *testing.T, schema string) {
	dbURL, flags := dbtest.NewDB(t), []string{"heartbeat", "event-types", "--database-url"}
	if schema != "" {
		dbURL, flags = dbtest.NewDBInSchema(t, schema), []string{"heartbeat", "event-types", "--schema", schema, "--database-url"}
	}
	run := func(want int, args ...string) string {
		t.Helper()
		var out, errb bytes.Buffer
		if code := realMain(t.Context(), append(append(flags, dbURL), args...), &out, &errb); code != want {
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
