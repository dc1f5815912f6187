package pgbouncer

import (
	"context"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/batchclaim/batchclaim/testkit/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// startOrSkip starts pgbouncer in mode in front of a new test database and returns it and
// the database's name; without pgbouncer the test is skipped unless REQUIRE_PGBOUNCER=1.
func startOrSkip(t *testing.T, mode string) (*Bouncer, string) {
	t.Helper()
	if _, err := Find(); err != nil {
		if os.Getenv("REQUIRE_PGBOUNCER") == "1" {
			t.Fatalf("REQUIRE_PGBOUNCER=1 but %v", err)
		}
		t.Skipf("%v", err)
	}
	u, err := url.Parse(dbtest.NewDB(t))
	if err != nil {
		t.Fatal(err)
	}
	b, err := Start(t.Context(), Options{Target: u.Host, Mode: mode})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Stop)
	return b, strings.TrimPrefix(u.Path, "/")
}

// What a transaction-mode pooler does to a client: it refuses startup parameters it does not
// track; statements that prepare nothing by name (pgx's exec mode) work.
func TestTransactionMode(t *testing.T) {
	t.Parallel()
	b, db := startOrSkip(t, ModeTransaction)
	ctx := t.Context()

	cfg, err := pgx.ParseConfig(b.URL(db, nil))
	if err != nil {
		t.Fatal(err)
	}
	cfg.RuntimeParams["lock_timeout"] = "200"
	if conn, err := pgx.ConnectConfig(ctx, cfg); err == nil {
		conn.Close(ctx)
		t.Fatal("pgbouncer accepted the startup parameter lock_timeout; want it refused")
	} else if !strings.Contains(err.Error(), "unsupported startup parameter") {
		t.Fatalf("connect with lock_timeout: %v, want unsupported startup parameter", err)
	}

	conn, err := pgx.Connect(ctx, b.URL(db, url.Values{"default_query_exec_mode": {"exec"}}))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	for i := range 20 {
		var n int
		if err := conn.QueryRow(ctx, `SELECT $1::int + 1`, i).Scan(&n); err != nil || n != i+1 {
			t.Fatalf("exec mode through the pooler: %d, %v", n, err)
		}
	}
}
