package dbtest_test

import (
	"context"
	"os"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batchclaim/batchclaim/testkit/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

func TestParallelTestsGetTheirOwnMigratedDatabases(t *testing.T) {
	t.Parallel()
	var names [4]string
	t.Run("group", func(t *testing.T) {
		for i := range names {
			t.Run("db", func(t *testing.T) {
				t.Parallel()
				ctx := t.Context()
				pool := dbtest.NewPool(t)
				if err := pool.QueryRow(ctx, "SELECT current_database()").Scan(&names[i]); err != nil {
					t.Fatal(err)
				}
				if !hasTable(t, pool, "service_id_claims") {
					t.Fatal("table batchclaim.service_id_claims missing: database not copied from the migrated template")
				}
			})
		}
	})
	seen := map[string]bool{}
	for _, n := range names {
		if n == "" || seen[n] {
			t.Fatalf("databases %q: want distinct, non-empty names", names)
		}
		seen[n] = true
	}
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, dbtest.AdminURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var left int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_database WHERE datname = ANY($1)", names[:]).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Fatalf("%d of the databases %q left after their tests ended", left, names)
	}
}

func TestDatabasesAreIsolated(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	a, b := dbtest.NewPool(t), dbtest.NewPool(t)
	if _, err := a.Exec(ctx, "CREATE TABLE batchclaim.only_in_a (id int)"); err != nil {
		t.Fatal(err)
	}
	if !hasTable(t, a, "only_in_a") || hasTable(t, b, "only_in_a") {
		t.Fatal("a table created in one database is visible in the other, or missing in its own")
	}
}

func TestTemplateRefusesConnections(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, dbtest.AdminURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	// This binary's template only: other test binaries on the same server may be migrating
	// theirs right now.
	dbtest.NewDB(t) // the template exists once a copy was made
	var mine, open int
	err = conn.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE datallowconn) FROM pg_database
		WHERE datname LIKE 'bctpl\_' || $1 || '\_%'`, strconv.Itoa(os.Getpid())).Scan(&mine, &open)
	if err != nil {
		t.Fatal(err)
	}
	if mine != 1 || open != 0 {
		t.Fatalf("this binary has %d template databases, %d of them accepting connections; want one, idle, for copies", mine, open)
	}
}

// TestClusterRestart is not parallel: it restarts this binary's server before the parallel
// tests run.
func TestClusterRestart(t *testing.T) {
	c := dbtest.Cluster(t)
	if c == nil {
		t.Skip("server is not a throwaway cluster (TEST_DATABASE_URL or Docker)")
	}
	ctx := t.Context()
	url := dbtest.NewDB(t)
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "CREATE TABLE kept (id int); INSERT INTO kept VALUES (7)"); err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)
	if err := c.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	conn, err = pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("connect after restart: %v", err)
	}
	defer conn.Close(ctx)
	var id int
	if err := conn.QueryRow(ctx, "SELECT id FROM kept").Scan(&id); err != nil || id != 7 {
		t.Fatalf("row after restart: %d, %v; want 7", id, err)
	}
	if !hasTable(t, dbtest.NewPool(t), "service_id_claims") {
		t.Fatal("NewDB after a restart gave a database without the schema")
	}
}

func hasTable(t *testing.T, pool *pgxpool.Pool, name string) bool {
	t.Helper()
	var ok bool
	if err := pool.QueryRow(context.Background(), "SELECT to_regclass($1) IS NOT NULL", "batchclaim."+name).Scan(&ok); err != nil {
		t.Fatal(err)
	}
	return ok
}

// A held snapshot keeps a row version it saw from vacuum: after an update and a VACUUM the
// table still has the dead version; once the test that held it ended, VACUUM removes it.
func TestHoldSnapshot(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.NewPool(t)
	if _, err := pool.Exec(ctx, `CREATE TABLE held (id int PRIMARY KEY, v int); INSERT INTO held VALUES (1, 0)`); err != nil {
		t.Fatal(err)
	}
	dead := func() (n int64) {
		t.Helper()
		if _, err := pool.Exec(ctx, `VACUUM held`); err != nil {
			t.Fatal(err)
		}
		if err := pool.QueryRow(ctx, `SELECT n_dead_tup FROM pg_stat_user_tables WHERE relname = 'held'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	t.Run("held", func(t *testing.T) {
		dbtest.HoldSnapshot(t, pool)
		if _, err := pool.Exec(ctx, `UPDATE held SET v = 1`); err != nil {
			t.Fatal(err)
		}
		if n := dead(); n != 1 {
			t.Fatalf("%d dead row versions after VACUUM while the snapshot is held, want 1", n)
		}
	})
	if n := dead(); n != 0 {
		t.Fatalf("%d dead row versions after VACUUM once the snapshot was let go, want 0", n)
	}
}
