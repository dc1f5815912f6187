package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/batchclaim/batchclaim/cmd/batchclaim/internal/chaos"
	"github.com/batchclaim/batchclaim/cmd/batchclaim/internal/testbin"
	"github.com/batchclaim/batchclaim/testkit/pglocal"
)

// TestChaosShort runs the short chaos runs that CI runs: about two minutes of every fault kind
// and every operation (Retry, Cancel, run-at, retention and drop-idle turned on, a starved
// pool, ...) against real instances, a throwaway primary with a synchronous standby and the
// ledger simulator; then the same with the instances dropping idle claim rows from the start,
// so that rows deleted and created again while faults run are checked throughout. It fails on
// any violated invariant (the key's promise included) and prints the seed's replay command.
// CHAOS_SEED picks another seed.
func TestChaosShort(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos takes about two minutes per run")
	}
	if _, err := pglocal.Find(""); err != nil {
		if os.Getenv("REQUIRE_DB") == "1" {
			t.Fatalf("REQUIRE_DB=1 but chaos needs local PostgreSQL binaries for its own cluster: %v", err)
		}
		t.Skipf("no local PostgreSQL binaries: %v", err)
	}
	t.Parallel()
	bin := testbin.Path(t)
	seed := os.Getenv("CHAOS_SEED")
	if seed == "" {
		seed = "1"
	}
	// One after the other: two runs at once on a small machine would stretch takeovers.
	t.Run("default", func(t *testing.T) {
		rep := chaosShort(t, bin, seed)
		if rep.TakeoversJudged == 0 {
			t.Errorf("no takeover judged: %+v", rep)
		}
		if rep.Operations[chaos.OpDropIdleOn] == 0 && (rep.DropIdleAfterMs != 0 || rep.Dropped != 0) {
			t.Errorf("rows dropped without --drop-idle-after or drop_idle_on: %+v", rep)
		}
	})
	// Here a victim's claims are judged only where they had work (an idle row may be dropped
	// instead of taken over), which in a one-minute run depends on timing: takeovers are
	// required of the run above, rows dropped of this one.
	t.Run("drop-idle", func(t *testing.T) {
		rep := chaosShort(t, bin, seed, "--drop-idle-after", "1s")
		if rep.DropIdleAfterMs != 1000 || rep.Dropped == 0 {
			t.Errorf("idle claim rows were not dropped: drop_idle_after_ms %d, claims_dropped %d", rep.DropIdleAfterMs, rep.Dropped)
		}
	})
}

// chaosShort runs a 60s chaos run with extra flags and fails the test on any violation.
func chaosShort(t *testing.T, bin, seed string, extra ...string) chaos.Report {
	t.Helper()
	args := append([]string{"chaos", "--json", "--seed", seed, "--duration", "60s", "--log-dir", t.TempDir()}, extra...)
	cmd := exec.Command(bin, args...)
	// The run owns its cluster: never the shared server a test run may point at.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "DATABASE_URL=") && !strings.HasPrefix(kv, "BATCHCLAIM_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	var rep chaos.Report
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("chaos did not print one JSON report (%v, exit %v): %s\nprogress:\n%s", err, runErr, stdout.String(), stderr.String())
	}
	for _, k := range chaos.Kinds() {
		if rep.Faults[k] == 0 && !slices.Contains(rep.Skipped, k) {
			t.Errorf("fault %s never injected", k)
		}
	}
	for _, k := range chaos.Operations() {
		if rep.Operations[k] == 0 && !slices.Contains(rep.OpsSkipped, k) {
			t.Errorf("operation %s never acted", k)
		}
	}
	for _, k := range chaos.Invariants() {
		if _, ok := rep.Violations[k]; !ok {
			t.Errorf("report lacks violations.%s", k)
		}
	}
	if rep.Batches == 0 || rep.Committed == 0 || rep.Acquisitions == 0 || rep.Writes == 0 {
		t.Errorf("the run checked too little: %+v", rep)
	}
	if n := rep.Violated(); n > 0 || runErr != nil {
		var bad []string
		for _, k := range chaos.Invariants() {
			if rep.Violations[k] > 0 {
				bad = append(bad, k)
			}
		}
		slices.Sort(bad)
		t.Fatalf("%d violations (%s), exit %v; replay: %s\nproblems:\n  %s\ndiagnoses:\n  %s\nprogress:\n%s",
			n, strings.Join(bad, ", "), runErr, rep.Replay, strings.Join(rep.Problems, "\n  "),
			strings.Join(rep.Diagnoses, "\n  "), stderr.String())
	}
	return rep
}
