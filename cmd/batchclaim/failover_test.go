package main

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"testing"

	"github.com/batchclaim/batchclaim/cmd/batchclaim/internal/testbin"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
)

// failover demo --json: four node processes, the primary SIGKILLed, the next primary
// SIGSTOPped and the orchestrating replica SIGKILLed mid-failover; the printed object has the
// four invariant counters at 0 and shows the failover finished by another replica.
func TestFailoverDemoJSON(t *testing.T) {
	t.Parallel()
	bin := testbin.Path(t)
	cmd := exec.Command(bin, "failover", "demo", "--json", "--schema", "ha") // no batchclaim schema in its database
	cmd.Env = append(cmd.Environ(), "DATABASE_URL="+dbtest.AdminURL(t))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("failover demo: %v\n%s", err, stderr.String())
	}
	var sum struct {
		TwoPrimaries      *int `json:"two_primaries"`
		NotMostUpToDate   *int `json:"not_most_up_to_date"`
		OrphanedFailovers *int `json:"orphaned_failovers"`
		LostCommands      *int `json:"lost_commands"`
		Failovers         []struct {
			Epoch       int64  `json:"epoch"`
			NewPrimary  string `json:"new_primary"`
			DecidedBy   string `json:"decided_by"`
			Outcome     string `json:"outcome"`
			CompletedBy string `json:"completed_by"`
		} `json:"failovers"`
		ResumedByAnother int      `json:"decisions_completed_by_another_node"`
		LockExpired      int      `json:"lock_acquisitions_expired"`
		CommandsIssued   int64    `json:"commands_issued"`
		CommandsConsumed int64    `json:"commands_consumed"`
		Faults           []string `json:"faults"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &sum); err != nil {
		t.Fatalf("stdout is not one JSON object: %v\n%s", err, stdout.String())
	}
	for name, v := range map[string]*int{"two_primaries": sum.TwoPrimaries, "not_most_up_to_date": sum.NotMostUpToDate,
		"orphaned_failovers": sum.OrphanedFailovers, "lost_commands": sum.LostCommands} {
		if v == nil || *v != 0 {
			t.Errorf("%s = %v, want present and 0", name, v)
		}
	}
	if len(sum.Faults) != 3 || len(sum.Failovers) < 2 || sum.LockExpired < 1 || sum.CommandsIssued == 0 || sum.CommandsIssued != sum.CommandsConsumed {
		t.Fatalf("summary: %s", stdout.String())
	}
	// The first failover goes to n3 (980), the most up to date once n1 (1000) is dead.
	if f := sum.Failovers[0]; f.Epoch != 2 || f.NewPrimary != "n3" || f.Outcome != "completed" {
		t.Fatalf("first failover: %+v", f)
	}
	// The stalled orchestrator's failover was finished by another replica: resumed, or
	// superseded by a newer decision that completed.
	last := sum.Failovers[len(sum.Failovers)-1]
	if last.Outcome != "completed" || last.CompletedBy == sum.Failovers[1].DecidedBy {
		t.Fatalf("failovers after the orchestrator was killed: %+v", sum.Failovers)
	}
}
