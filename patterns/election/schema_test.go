package election_test

import (
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batchclaim/batchclaim/patterns/election"
	"github.com/batchclaim/batchclaim/pgdb"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
	"github.com/batchclaim/batchclaim/testkit/testutil"
)

// An elector in a schema other than batchclaim: the database has no batchclaim schema at
// all, so its own connection, its resignation and Fence in the caller's transaction must all
// find the election's tables in the configured one.
func TestElectionInSchema(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool, err := pgxpool.New(ctx, dbtest.NewDBInSchema(t, "pat"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if _, err := pool.Exec(ctx, `CREATE TABLE test_writes (id bigserial PRIMARY KEY, name text NOT NULL, epoch bigint NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	db := dbtest.Open(t, pool, "pat")
	el, rec, stop := startElector(t, db, "a", []string{"r"}, nil)
	testutil.WaitFor(t, 10*time.Second, "elected primary of r", func() bool {
		elected, _ := rec.snapshot()
		return len(elected) == 1
	})
	term, ok := el.CheckPrimary("r")
	if !ok || term.Epoch != 1 {
		t.Fatalf("CheckPrimary: %+v %v", term, ok)
	}
	// The application's transaction, unwrapped: Fence puts its own statements in the schema.
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if err := el.Fence(ctx, tx, term); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO test_writes (name, epoch) VALUES ('a', $1)`, term.Epoch)
		return err
	})
	if err != nil {
		t.Fatalf("fenced write: %v", err)
	}
	// The package functions take the DB, a Querier in its schema.
	if p, err := election.GetPrimary(ctx, db, "r"); err != nil || p.InstanceID != el.InstanceID() {
		t.Fatalf("GetPrimary: %+v %v", p, err)
	}
	stop() // resigns, in the schema
	var resigned int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM pat.election_events WHERE role = 'r' AND event = 'resigned'`).Scan(&resigned); err != nil || resigned != 1 {
		t.Fatalf("resigned events in pat: %d, %v; want 1", resigned, err)
	}

	if _, err := election.New(pgdb.DB{}, election.Config{Roles: []string{"r"}}); err == nil || !strings.Contains(err.Error(), "election: no database") {
		t.Fatalf("New with the zero DB: %v, want it refused", err)
	}
}
