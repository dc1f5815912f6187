package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batchclaim/batchclaim/cmd/batchclaim/internal/testbin"
	"github.com/batchclaim/batchclaim/patterns/election"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
	"github.com/batchclaim/batchclaim/testkit/testutil"
)

// `election demo --json` runs its three processes and faults on a scratch database of the
// test server and reports every invariant counter at 0, with the three faults staged.
func TestElectionDemoJSON(t *testing.T) {
	t.Parallel()
	bin := testbin.Path(t)
	// In a schema of its own: the scratch database has no batchclaim schema, so a statement
	// or a process left in the default one fails the run.
	cmd := exec.Command(bin, "election", "demo", "--json", "--schema", "ha")
	cmd.Env = append(os.Environ(), "DATABASE_URL="+dbtest.AdminURL(t))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil {
		t.Fatalf("election demo: %v\nstderr:\n%s\nstdout:\n%s", err, stderr.String(), stdout.String())
	}
	var sum struct {
		TwoPrimaries        *int `json:"two_primaries"`
		StalePrimaryWrites  *int `json:"stale_primary_writes"`
		SlowElections       *int `json:"slow_elections"`
		ActingRecords       int  `json:"acting_records"`
		FencedWrites        int  `json:"fenced_writes"`
		StaleWritesRejected int  `json:"stale_writes_rejected"`
		Faults              []struct {
			Kind            string             `json:"kind"`
			ElectionSeconds map[string]float64 `json:"election_seconds"`
		} `json:"faults"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &sum); err != nil {
		t.Fatalf("stdout is not one JSON object: %v\n%s", err, stdout.String())
	}
	if sum.TwoPrimaries == nil || sum.StalePrimaryWrites == nil || sum.SlowElections == nil {
		t.Fatalf("a counter is missing: %s", stdout.String())
	}
	if *sum.TwoPrimaries != 0 || *sum.StalePrimaryWrites != 0 || *sum.SlowElections != 0 {
		t.Fatalf("invariants violated: %s", stdout.String())
	}
	var kinds []string
	for _, f := range sum.Faults {
		kinds = append(kinds, f.Kind)
		if len(f.ElectionSeconds) == 0 {
			t.Fatalf("fault %s was followed by no election: %s", f.Kind, stdout.String())
		}
	}
	if got := strings.Join(kinds, ","); got != "sigkill,sigstop,link_cut" {
		t.Fatalf("faults staged: %s", got)
	}
	if sum.ActingRecords == 0 || sum.FencedWrites == 0 || sum.StaleWritesRejected == 0 {
		t.Fatalf("the run exercised nothing: %s", stdout.String())
	}
	if !strings.Contains(stderr.String(), "SIGKILL") {
		t.Fatalf("the story did not go to stderr:\n%s", stderr.String())
	}
}

// `batchclaim primary` against a real elector: exit 0 on the primary's host, 1 elsewhere or
// when there is no primary, 2 on errors. GET /primary is tested in internal/electioncmd.
func TestPrimaryCommand(t *testing.T) {
	t.Parallel()
	url := dbtest.NewDB(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	// elect runs an elector of role scheduler on dbURL's schema until the test ends, once it
	// is the primary.
	elect := func(dbURL, schema, name, host string) {
		t.Helper()
		pool, err := pgxpool.New(ctx, dbURL)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		el, err := election.New(dbtest.Open(t, pool, schema), election.Config{Roles: []string{"scheduler"}, Name: name, Host: host,
			HeartbeatInterval: 300 * time.Millisecond, Timeout: 1500 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() { _ = el.Run(ctx) })
		testutil.WaitFor(t, 20*time.Second, "the elector of "+name+" elected", func() bool {
			_, ok := el.CheckPrimary("scheduler")
			return ok
		})
	}
	elect(url, "", "s1", "host-a")

	run := func(want int, args ...string) string {
		t.Helper()
		var stdout, stderr bytes.Buffer
		if code := realMain(t.Context(), args, &stdout, &stderr); code != want {
			t.Fatalf("%v: exit %d, want %d; stdout %q stderr %q", args, code, want, stdout.String(), stderr.String())
		}
		return stdout.String() + stderr.String()
	}
	if out := run(0, "primary", "--role", "scheduler", "--host", "host-a", "--database-url", url); !strings.Contains(out, "primary s1 on host host-a") {
		t.Fatalf("on the primary's host: %q", out)
	}
	if out := run(1, "primary", "--role", "scheduler", "--host", "host-b", "--database-url", url); !strings.Contains(out, "runs on host host-a, not host-b") {
		t.Fatalf("on another host: %q", out)
	}
	if out := run(1, "primary", "--role", "nobody", "--host", "host-a", "--database-url", url); !strings.Contains(out, "no live primary") {
		t.Fatalf("a role without primary: %q", out)
	}
	run(2, "primary", "--host", "host-a", "--database-url", url)
	run(2, "election")
	run(2, "election", "run", "--database-url", url)
	if out := run(1, "election", "run", "--roles", "a", "--interval", "1s", "--timeout", "2s", "--database-url", url); !strings.Contains(out, "T > 2I violated") {
		t.Fatalf("election run with T = 2I: %q", out)
	}
	run(2, "primary", "--role", "scheduler", "--database-url", "postgres://nobody@127.0.0.1:1/none?connect_timeout=1")
	if out := run(2, "primary", "--role", "scheduler", "--schema", "public", "--database-url", url); !strings.Contains(out, `--schema: schema "public"`) {
		t.Fatalf("primary --schema public: %q", out)
	}

	// A database whose tables are in another schema only, with its elector there.
	haURL := dbtest.NewDBInSchema(t, "ha")
	elect(haURL, "ha", "s2", "host-c")
	if out := run(0, "primary", "--role", "scheduler", "--host", "host-c", "--schema", "ha", "--database-url", haURL); !strings.Contains(out, "primary s2 on host host-c") {
		t.Fatalf("primary --schema ha: %q", out)
	}
	if out := run(2, "primary", "--role", "scheduler", "--host", "host-c", "--database-url", haURL); !strings.Contains(out, "schema batchclaim has no batchclaim tables: run migrate up") {
		t.Fatalf("primary in the default schema of a database migrated into ha: %q", out)
	}
}
