package migrations_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/batchclaim/batchclaim/internal/dbtest"
	"github.com/batchclaim/batchclaim/migrations"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// Up, down and up again round-trip on a fresh database: every down migration removes what its
// up migration made.
func TestUpDownUp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := dbtest.NewDB(t) // migrated up already
	latest, err := migrations.Latest()
	if err != nil {
		t.Fatal(err)
	}
	tables := func() []string {
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		rows, err := conn.Query(ctx, `SELECT table_name FROM information_schema.tables
			WHERE table_schema = 'public' AND table_name <> 'schema_migrations' ORDER BY table_name`)
		if err != nil {
			t.Fatal(err)
		}
		names, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		return names
	}
	version := func() uint {
		v, dirty, err := migrations.Version(ctx, url)
		if err != nil || dirty {
			t.Fatalf("version: %d dirty=%v err=%v", v, dirty, err)
		}
		return v
	}
	up := tables()
	if version() != latest || len(up) < 6 {
		t.Fatalf("after up: version %d of %d, tables %v", version(), latest, up)
	}
	if err := migrations.Down(ctx, url, 1); err != nil {
		t.Fatal(err)
	}
	if v := version(); v != latest-1 {
		t.Fatalf("one step down: version %d, want %d", v, latest-1)
	}
	if err := migrations.Down(ctx, url, 0); err != nil {
		t.Fatal(err)
	}
	if v, left := version(), tables(); v != 0 || len(left) != 0 {
		t.Fatalf("all the way down: version %d, tables left %v", v, left)
	}
	if err := migrations.Up(ctx, url); err != nil {
		t.Fatal(err)
	}
	if again := tables(); version() != latest || len(again) != len(up) {
		t.Fatalf("up again: version %d, tables %v, want %v", version(), again, up)
	}
}
