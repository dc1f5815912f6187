package ingest_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/batchclaim/batchclaim/ingest"
	"github.com/batchclaim/batchclaim/migrations"
	"github.com/batchclaim/batchclaim/testkit/pglocal"
	"github.com/batchclaim/batchclaim/testkit/testutil"
)

// A commit that waits for the synchronous standby and is given up (its context ended) has
// committed on the primary all the same, and its rows are visible there, though no standby
// has them: a failover to the standby loses them. An enqueue that finds such a job already
// stored must not report it stored any sooner than its first commit would have: the
// repeat's own commit waits for the standby too, until it has everything before it. Without
// that, a client that retries a timed-out enqueue is told "stored" of a job the next
// failover loses (found by the chaos suite on a Patroni cluster: lost_jobs).
func TestARepeatedEnqueueIsAsDurableAsTheFirst(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	if _, err := pglocal.Find(""); err != nil {
		if os.Getenv("REQUIRE_DB") == "1" {
			t.Fatalf("REQUIRE_DB=1: this test needs local PostgreSQL binaries: %v", err)
		}
		t.Skipf("needs local PostgreSQL binaries: %v", err)
	}
	cluster, err := pglocal.Start(ctx, pglocal.Options{Settings: map[string]string{"synchronous_commit": "on"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cluster.Stop(context.WithoutCancel(ctx)) })
	if err := migrations.Up(ctx, cluster.URL()); err != nil {
		t.Fatal(err)
	}
	// From now on, every commit that wrote waits for a synchronous standby that never comes.
	conn, err := pgx.Connect(ctx, cluster.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { conn.Close(context.WithoutCancel(ctx)) }()
	if _, err := conn.Exec(ctx, "ALTER SYSTEM SET synchronous_standby_names = 'absent_standby'"); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "SELECT pg_reload_conf()"); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, "the standby setting in force", func() bool {
		c, err := pgx.Connect(ctx, cluster.URL())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(ctx)
		var v string
		_ = c.QueryRow(ctx, "SHOW synchronous_standby_names").Scan(&v)
		return v == "absent_standby"
	})
	conn.Close(ctx)
	if conn, err = pgx.Connect(ctx, cluster.URL()); err != nil {
		t.Fatal(err)
	}

	enqueue := func(name string) (ingest.Stored, error) {
		t.Helper()
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // no-op after commit
		var s ingest.Stored
		if name == "bulk repeat" {
			var many []ingest.Stored
			if many, err = ingest.EnqueueMany(ctx, tx, []ingest.Job{{ServiceID: "k", BatchID: "job-1", Payload: []byte("payload")}}); err == nil {
				s = many[0]
			}
		} else {
			s, err = ingest.Enqueue(ctx, tx, "k", "job-1", []byte("payload"))
		}
		if err != nil {
			t.Fatalf("%s: enqueue: %v", name, err)
		}
		// Long enough that the COMMIT reaches the server (which then waits for the standby
		// that never answers) on a loaded machine too.
		cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		return s, tx.Commit(cctx)
	}
	if _, err := enqueue("first"); err == nil {
		t.Fatal("the first enqueue's commit returned without a standby")
	}
	// The connection was given up with the commit; the job is visible on the primary anyway.
	conn.Close(ctx)
	if conn, err = pgx.Connect(ctx, cluster.URL()); err != nil {
		t.Fatal(err)
	}
	var n int
	testutil.WaitFor(t, 10*time.Second, "the given-up commit's job visible on the primary", func() bool {
		err := conn.QueryRow(ctx, "SELECT count(*) FROM batchclaim.batches WHERE batch_id = 'job-1'").Scan(&n)
		return err == nil && n == 1
	})
	for _, name := range []string{"repeat", "bulk repeat"} {
		s, err := enqueue(name)
		if s.New {
			t.Fatalf("the %s stored the job again: %+v", name, s)
		}
		if err == nil {
			t.Fatalf("the %s was reported stored before the standby had the job", name)
		}
		if !strings.Contains(err.Error(), "deadline") {
			t.Fatalf("the %s's commit failed otherwise than by waiting: %v", name, err)
		}
		conn.Close(ctx)
		if conn, err = pgx.Connect(ctx, cluster.URL()); err != nil {
			t.Fatal(err)
		}
	}
}
