package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/batchclaim/batchclaim/cmd/batchclaim/internal/demo"
	"github.com/batchclaim/batchclaim/cmd/batchclaim/internal/patroni"
	"github.com/batchclaim/batchclaim/cmd/batchclaim/internal/testbin"
)

// TestDemoRidesThroughFailover runs the demo against a Patroni cluster (its multi-host URL as
// DATABASE_URL) and kills the leader's postmaster once batches are committing: the live
// table, the instances and the summary must ride through the failover, and the run must end
// with a verdict (nothing lost, order kept) rather than with the error of the moment the
// primary went away.
func TestDemoRidesThroughFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("a Patroni cluster and a demo take about a minute")
	}
	if _, err := patroni.Find(); err != nil {
		if os.Getenv("REQUIRE_PATRONI") == "1" {
			t.Fatalf("REQUIRE_PATRONI=1 but %v", err)
		}
		t.Skipf("%v (apt-get install patroni etcd-server)", err)
	}
	ctx := t.Context()
	c, err := patroni.Start(ctx, patroni.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop(context.Background())
	bin := testbin.Path(t)
	cmd := exec.Command(bin, "demo", "--json")
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "DATABASE_URL=") && !strings.HasPrefix(kv, "BATCHCLAIM_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "DATABASE_URL="+c.URL("postgres"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()

	// Once the demo's instances commit batches, kill the leader's postmaster.
	killed := ""
	deadline := time.Now().Add(2 * time.Minute)
	for killed == "" && time.Now().Before(deadline) {
		select {
		case err := <-done:
			t.Fatalf("demo ended before the failover: %v\n%s", err, stderr.String())
		case <-time.After(200 * time.Millisecond):
		}
		if committed(ctx, c) < 100 {
			continue
		}
		leader, err := c.Leader(ctx)
		if err != nil {
			continue
		}
		if err := c.KillPostmaster(ctx, leader); err != nil {
			t.Fatal(err)
		}
		killed = leader.Name
	}
	if killed == "" {
		t.Fatalf("the demo committed nothing in 2 minutes:\n%s", stderr.String())
	}
	var runErr error
	select {
	case runErr = <-done:
	case <-time.After(5 * time.Minute):
		_ = cmd.Process.Kill()
		t.Fatalf("the demo did not end 5 minutes after the failover:\n%s", stderr.String())
	}
	var sum demo.Summary
	if err := json.Unmarshal(stdout.Bytes(), &sum); err != nil {
		t.Fatalf("no JSON summary (%v, exit %v): %s\n%s", err, runErr, stdout.String(), stderr.String())
	}
	if runErr != nil || sum.Lost != 0 || sum.OrderViolations != 0 || sum.Committed == 0 {
		t.Fatalf("after the leader %s was killed: exit %v, %+v\n%s", killed, runErr, sum, stderr.String())
	}
	t.Logf("leader %s killed; the demo ended with %d committed, %d lost, %d out of order; unreachable lines in its table: %d",
		killed, sum.Committed, sum.Lost, sum.OrderViolations, strings.Count(stderr.String(), "database unreachable"))
}

// committed counts the COMMITTED batches of the demo's scratch database, if there is one yet.
func committed(ctx context.Context, c *patroni.Cluster) int {
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		return 0
	}
	var name string
	err = conn.QueryRow(ctx, `SELECT datname FROM pg_database WHERE datname LIKE 'batchclaim_demo%' LIMIT 1`).Scan(&name)
	conn.Close(ctx)
	if err != nil {
		return 0
	}
	cfg, err := pgx.ParseConfig(c.URL(name))
	if err != nil {
		return 0
	}
	db, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return 0
	}
	defer db.Close(ctx)
	var n int
	_ = db.QueryRow(ctx, `SELECT count(*) FROM batchclaim.batches WHERE state = 'COMMITTED'`).Scan(&n)
	return n
}
