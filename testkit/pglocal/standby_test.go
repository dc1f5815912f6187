package pglocal

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// A synchronous standby has every commit of the primary: the primary is killed, the standby
// promoted, and it has the row, its commit timestamp, and takes writes; a new standby of the
// promoted server then runs on the old primary's port.
func TestStandbyFailover(t *testing.T) {
	if _, err := Find(""); err != nil {
		if os.Getenv("REQUIRE_DB") == "1" {
			t.Fatalf("REQUIRE_DB=1 but %v", err)
		}
		t.Skipf("no local PostgreSQL binaries: %v", err)
	}
	ctx := t.Context()
	primary, err := Start(ctx, Options{Settings: map[string]string{"synchronous_commit": "on", "track_commit_timestamp": "on"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = primary.Stop(context.Background()) })
	standby, err := primary.StartStandby(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = standby.Stop(context.Background()) })
	if err := primary.SetSynchronousStandbys(ctx, "*"); err != nil {
		t.Fatal(err)
	}
	if err := primary.WaitStreaming(ctx, true); err != nil {
		t.Fatal(err)
	}
	exec := func(c *Cluster, sql string) {
		t.Helper()
		conn, err := pgx.Connect(ctx, c.URL())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	exec(primary, "CREATE TABLE kept (id int); INSERT INTO kept VALUES (7)")
	if _, err := standby.queryInt(ctx, "SELECT 1"); err != nil {
		t.Fatalf("standby does not answer: %v", err)
	}
	if n, err := standby.queryInt(ctx, "SELECT CASE WHEN pg_is_in_recovery() THEN 1 ELSE 0 END"); err != nil || n != 1 {
		t.Fatalf("standby in recovery: %d, %v", n, err)
	}

	oldPort := primary.Port()
	if err := primary.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	if primary.Running() {
		t.Fatal("killed primary still running")
	}
	if err := standby.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := standby.queryInt(ctx, "SELECT count(*) FROM kept WHERE id = 7 AND pg_xact_commit_timestamp(xmin) IS NOT NULL"); err != nil || n != 1 {
		t.Fatalf("promoted standby has %d committed rows with a commit timestamp (%v), want 1", n, err)
	}
	exec(standby, "INSERT INTO kept VALUES (8)") // no standby of its own: must not wait for one

	if err := primary.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	next, err := standby.StartStandby(ctx, oldPort)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = next.Stop(context.Background()) })
	if next.Port() != oldPort {
		t.Fatalf("new standby on port %d, want %d", next.Port(), oldPort)
	}
	if err := standby.SetSynchronousStandbys(ctx, "*"); err != nil {
		t.Fatal(err)
	}
	if err := standby.WaitStreaming(ctx, true); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(wctx, standby.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(wctx, "INSERT INTO kept VALUES (9)"); err != nil {
		t.Fatalf("commit with the new synchronous standby: %v", err)
	}
}
