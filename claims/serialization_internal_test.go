package claims

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/batchclaim/batchclaim/internal/dbtest"
)

// TestSerializationFailureIsRetried provokes a real write skew against the claim cycle's
// SERIALIZABLE transaction and checks that the cycle retries and then succeeds.
//
// Transaction X reads the free claim rows, then, while the cycle's transaction is open (it has
// read the registry for maintenance and taken the free claims), updates this instance's
// registry row of another instance and commits. X read rows the cycle wrote and the cycle read a row X wrote: a
// read-write cycle Postgres must break by failing the cycle's transaction with SQLSTATE 40001.
// (X writes a row the cycle only reads, so neither waits for the other's locks.)
func TestSerializationFailureIsRetried(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.NewPool(t)
	ids := make([]string, 10)
	for i := range ids {
		ids[i] = fmt.Sprintf("svc-%02d", i)
	}
	if err := RegisterServiceIDs(ctx, pool, ids...); err != nil {
		t.Fatal(err)
	}
	e, err := New(pool, Config{Name: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Register(ctx); err != nil {
		t.Fatal(err)
	}
	// A second registered instance whose row X will write (the cycle's own row is written by
	// its heartbeat, which would make X, not the cycle, the one to fail).
	other, err := New(pool, Config{Name: "other"})
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Register(ctx); err != nil {
		t.Fatal(err)
	}

	x, err := pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.Serializable})
	if err != nil {
		t.Fatal(err)
	}
	defer x.Rollback(ctx) //nolint:errcheck
	if _, err := x.Exec(ctx, `SELECT count(*) FROM service_id_claims WHERE claimant IS NULL`); err != nil {
		t.Fatal(err)
	}
	var xErr error
	calls := 0
	e.testHookBeforeCommit = func() {
		calls++
		if calls > 1 {
			return
		}
		if _, err := x.Exec(ctx, `UPDATE instances SET version = version || '' WHERE id = $1`, other.InstanceID()); err != nil {
			xErr = err
			return
		}
		xErr = x.Commit(ctx)
	}
	rep, err := e.Cycle(ctx)
	if err != nil {
		t.Fatalf("cycle did not succeed after retrying: %v", err)
	}
	if xErr != nil {
		t.Fatalf("the conflicting transaction failed instead of the cycle: %v", xErr)
	}
	if rep.Retries < 1 || e.Stats().SerializationRetries < 1 {
		t.Fatalf("retries: report %d, stats %d; want at least 1 (the conflict was not provoked)", rep.Retries, e.Stats().SerializationRetries)
	}
	if rep.Held != rep.Share.Target || rep.Held == 0 {
		t.Fatalf("after the retry the cycle holds %d claims, want its target %d", rep.Held, rep.Share.Target)
	}
}
