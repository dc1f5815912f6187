package main

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"testing"

	"github.com/batchclaim/batchclaim/cmd/batchclaim/internal/testbin"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
)

// singleflight demo --json on a small shape: separate worker processes, one SIGKILLed
// mid-fetch; the summary is one JSON object whose invariant counters are 0 and which shows
// the takeover.
func TestSingleflightDemoJSON(t *testing.T) {
	t.Parallel()
	bin := testbin.Path(t)
	cmd := exec.Command(bin, "singleflight", "demo", "--json", "--processes", "3", "--keys", "3", "--duration", "6s",
		"--schema", "ha") // no batchclaim schema in its database
	cmd.Env = append(cmd.Environ(), "DATABASE_URL="+dbtest.AdminURL(t))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("singleflight demo: %v\n%s\n%s", err, stdout.String(), stderr.String())
	}
	var sum map[string]any
	if err := json.Unmarshal(stdout.Bytes(), &sum); err != nil {
		t.Fatalf("stdout is not one JSON object: %v\n%s", err, stdout.String())
	}
	for _, k := range []string{"parallel_fetches", "lost_results", "stale_overwrites", "epochs_reused"} {
		if v, ok := sum[k]; !ok || v != 0.0 {
			t.Errorf("%s = %v, want 0", k, v)
		}
	}
	if sum["killed_epoch"].(float64) == 0 || sum["takeover_epoch"].(float64) <= sum["killed_epoch"].(float64) {
		t.Errorf("no takeover after the SIGKILL: %v", sum)
	}
	if sum["waiters_of_killed_key"] != 2.0 || sum["gets"].(float64) == 0 || sum["fetches"].(float64) < 2 {
		t.Errorf("summary: %v", sum)
	}
}
