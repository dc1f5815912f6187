package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/batchclaim/batchclaim/cmd/batchclaim/internal/testbin"
	"github.com/batchclaim/batchclaim/dlt"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
)

// Every command that works on batchclaim's tables, given a schema that has none, stops at
// once with the same line saying to migrate, instead of serving errors (ui, run, the
// pattern services) or printing the database's own error (enqueue). The real binary runs
// each, so that one that starts serving instead shows as a process still running.
func TestEveryCommandSaysRunMigrateUp(t *testing.T) {
	t.Parallel()
	bin := testbin.Path(t)
	dbURL := dbtest.NewDB(t) // migrated into the default schema: "nope" has no tables
	list := filepath.Join(t.TempDir(), "list")
	_, l := dlt.FakeBatch("svc", 0)
	if err := os.WriteFile(list, l, 0o600); err != nil {
		t.Fatal(err)
	}
	const want = "schema nope has no batchclaim tables: run migrate up"
	for _, c := range []struct {
		args []string
		exit int
	}{
		{[]string{"status"}, 1},
		{[]string{"resume", "svc"}, 1},
		{[]string{"retry", "1"}, 1},
		{[]string{"cancel", "1"}, 1},
		{[]string{"enqueue", "--service-id", "svc", list}, 1},
		{[]string{"ui", "--listen", "127.0.0.1:0"}, 1},
		{[]string{"run", "--dlt-url", "http://127.0.0.1:1", "--listen", "127.0.0.1:0"}, 1},
		{[]string{"run", "--claims-only"}, 1},
		{[]string{"heartbeat", "run", "--listen", "127.0.0.1:0"}, 1},
		{[]string{"heartbeat", "event-types", "show"}, 1},
		{[]string{"election", "run", "--roles", "r"}, 1},
		{[]string{"primary", "--role", "r"}, 2},
		{[]string{"failover", "node", "--shard", "s", "--node-id", "n"}, 1},
	} {
		name := strings.Join(c.args[:min(2, len(c.args))], " ")
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, append(c.args, "--schema", "nope", "--database-url", dbURL)...)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			var exit *exec.ExitError
			if ctx.Err() != nil {
				t.Fatalf("%v was still running after 60s instead of stopping: %s", c.args, stderr.String())
			}
			if !errors.As(err, &exit) || exit.ExitCode() != c.exit {
				t.Fatalf("%v: %v, want exit %d; stderr %s", c.args, err, c.exit, stderr.String())
			}
			out := strings.TrimSpace(stderr.String())
			if !strings.Contains(out, want) || strings.Count(out, "\n") != 0 || stdout.Len() != 0 {
				t.Errorf("%v said %q (stdout %q), want one line with %q", c.args, out, stdout.String(), want)
			}
		})
	}
}
