package node_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/batchclaim/batchclaim/dlt"
	"github.com/batchclaim/batchclaim/dlt/dltsim"
	"github.com/batchclaim/batchclaim/migrations"
	"github.com/batchclaim/batchclaim/testkit/history"
	"github.com/batchclaim/batchclaim/testkit/pglocal"
	"github.com/batchclaim/batchclaim/testkit/testutil"
)

// TestPostgresRestart restarts the database server under two working instances. They lose
// every connection (and fence themselves if the restart outlasts their local deadline), then
// reconnect; in the end every batch is committed in order with one owner at a time. The test
// runs its own throwaway cluster, since it must restart the server.
func TestPostgresRestart(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	if _, err := pglocal.Find(""); err != nil {
		if os.Getenv("REQUIRE_DB") == "1" {
			t.Fatalf("REQUIRE_DB=1: this test needs local PostgreSQL binaries: %v", err)
		}
		t.Skipf("needs local PostgreSQL binaries to restart a server: %v", err)
	}
	cluster, err := pglocal.Start(ctx, pglocal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cluster.Stop(context.WithoutCancel(ctx)) })
	conn, err := pgx.Connect(ctx, cluster.URL())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE restart_test"); err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)
	dbURL := cluster.URL()[:len(cluster.URL())-len("/postgres?sslmode=disable")] + "/restart_test?sslmode=disable"
	if err := migrations.Up(ctx, dbURL); err != nil {
		t.Fatal(err)
	}

	e := setup(t, dlt.FlavorSawtooth, dltsim.Config{CommitLatency: 50 * time.Millisecond})
	e.url, e.admin = dbURL, newPool(t, dbURL) // the instances and checks use the restartable cluster
	e.enqueue(8, 6)
	e.start("a", nil)
	e.start("b", nil)
	testutil.WaitFor(t, 30*time.Second, "work in progress", func() bool { return len(e.sim.Committed()) >= 8 })
	if err := cluster.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	e.waitFinished(90 * time.Second)
	e.check()
	rep, err := history.CheckClaims(ctx, e.admin)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Problems) > 0 {
		t.Fatalf("claim history: %v", rep.Problems)
	}
}
