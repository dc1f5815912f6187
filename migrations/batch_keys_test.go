package migrations_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/batchclaim/batchclaim/migrations"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
)

// insertBatch stores a batch the way an application's own INSERT would, and says the seq it
// got (0 when the insert stored nothing).
func insertBatch(t *testing.T, conn *pgx.Conn, serviceID, batchID string, ledger bool) int64 {
	t.Helper()
	var seq int64
	err := conn.QueryRow(t.Context(), `INSERT INTO batchclaim.batches (service_id, batch_id, payload, ledger)
		VALUES ($1, $2, '\x00', $3) ON CONFLICT DO NOTHING RETURNING seq`, serviceID, batchID, ledger).Scan(&seq)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0
	}
	if err != nil {
		t.Fatalf("insert %s/%s: %v", serviceID, batchID, err)
	}
	return seq
}

// Migration 15 moves enqueue deduplication to batch_keys (and ledger_batch_keys): the pairs
// and ledger ids stored before it are copied, every insert (whoever writes it) is idempotent
// on its pair as the unique constraint made it, a ledger id stored under another service_id
// leaves no pair behind, a deleted (or truncated) batch frees its pair and its ledger id, and
// going down puts the constraint back.
func TestBatchKeysKeepEnqueuesIdempotent(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url := dbtest.NewDB(t)
	latest, err := migrations.Latest()
	if err != nil {
		t.Fatal(err)
	}
	if err := migrations.Down(ctx, url, int(latest)-14); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	before := []int64{
		insertBatch(t, conn, "a", "one", false),
		insertBatch(t, conn, "a", "two", false),
		insertBatch(t, conn, "b", "one", false),
		insertBatch(t, conn, "b", "ledger-1", true),
	}
	if err := migrations.Up(ctx, url); err != nil {
		t.Fatal(err)
	}
	if n := count(t, conn, `SELECT count(*) FROM batchclaim.batch_keys k JOIN batchclaim.batches b
		ON b.seq = k.seq AND b.service_id = k.service_id AND b.batch_id = k.batch_id`); n != len(before) {
		t.Fatalf("%d pairs copied, want %d", n, len(before))
	}
	if n := count(t, conn, `SELECT count(*) FROM batchclaim.ledger_batch_keys WHERE batch_id = 'ledger-1' AND seq = $1`, before[3]); n != 1 {
		t.Fatal("the ledger id stored before the migration was not copied")
	}
	if n := count(t, conn, `SELECT count(*) FROM pg_constraint WHERE conname = 'batches_service_id_batch_id_key'`); n != 0 {
		t.Fatal("the unique constraint on batches is still there")
	}

	// A pair stored before or after the migration is stored once.
	if seq := insertBatch(t, conn, "a", "one", false); seq != 0 {
		t.Fatalf("a/one stored again as seq %d", seq)
	}
	three := insertBatch(t, conn, "a", "three", false)
	if three == 0 {
		t.Fatal("a/three not stored")
	}
	if seq := insertBatch(t, conn, "a", "three", false); seq != 0 {
		t.Fatalf("a/three stored again as seq %d", seq)
	}
	// The same id under another service_id is another batch; a ledger id is not.
	if insertBatch(t, conn, "c", "three", false) == 0 {
		t.Fatal("c/three not stored")
	}
	if seq := insertBatch(t, conn, "c", "ledger-1", true); seq != 0 {
		t.Fatalf("ledger id of b stored under c as seq %d", seq)
	}
	if n := count(t, conn, `SELECT count(*) FROM batchclaim.batch_keys WHERE service_id = 'c' AND batch_id = 'ledger-1'`); n != 0 {
		t.Fatal("the refused ledger id left its pair behind")
	}
	// A ledger batch whose pair is stored already (as a batch not for the ledger) is refused
	// on the pair and registers no ledger id.
	if seq := insertBatch(t, conn, "c", "three", true); seq != 0 {
		t.Fatalf("c/three stored again, for the ledger, as seq %d", seq)
	}
	if n := count(t, conn, `SELECT count(*) FROM batchclaim.ledger_batch_keys WHERE batch_id = 'three'`); n != 0 {
		t.Fatal("a refused ledger batch registered its id")
	}
	// Deleting a ledger batch frees its id for another service_id.
	if _, err := conn.Exec(ctx, `DELETE FROM batchclaim.batches WHERE batch_id = 'ledger-1'`); err != nil {
		t.Fatal(err)
	}
	if insertBatch(t, conn, "c", "ledger-1", true) == 0 {
		t.Fatal("ledger-1 not stored under c after b's was deleted")
	}
	if n, m := count(t, conn, `SELECT count(*) FROM batchclaim.ledger_batch_keys l
		JOIN batchclaim.batches b ON b.seq = l.seq AND b.batch_id = l.batch_id AND b.ledger`),
		count(t, conn, `SELECT count(*) FROM batchclaim.ledger_batch_keys`); n != 1 || m != 1 {
		t.Fatalf("%d ledger ids name their ledger batch, of %d; want 1 of 1", n, m)
	}
	// Deleting a batch frees its pair; a statement that deletes several frees them all.
	if _, err := conn.Exec(ctx, `DELETE FROM batchclaim.batches WHERE service_id = 'a' AND batch_id IN ('one', 'two')`); err != nil {
		t.Fatal(err)
	}
	again := insertBatch(t, conn, "a", "one", false)
	if again == 0 || again == before[0] {
		t.Fatalf("a/one after its delete: seq %d (first stored as %d)", again, before[0])
	}
	if n := count(t, conn, `SELECT count(*) FROM batchclaim.batch_keys k
		WHERE NOT EXISTS (SELECT 1 FROM batchclaim.batches b WHERE b.seq = k.seq)`); n != 0 {
		t.Fatalf("%d pairs name no batch", n)
	}
	if n, m := count(t, conn, `SELECT count(*) FROM batchclaim.batch_keys`), count(t, conn, `SELECT count(*) FROM batchclaim.batches`); n != m {
		t.Fatalf("%d pairs for %d batches", n, m)
	}

	// A TRUNCATE frees every pair.
	if _, err := conn.Exec(ctx, `TRUNCATE batchclaim.batches CASCADE`); err != nil {
		t.Fatal(err)
	}
	if insertBatch(t, conn, "a", "three", false) == 0 {
		t.Fatal("a/three not stored after a TRUNCATE")
	}
	if n := count(t, conn, `SELECT count(*) FROM batchclaim.ledger_batch_keys`); n != 0 {
		t.Fatalf("%d ledger ids left after a TRUNCATE", n)
	}
	if err := migrations.Down(ctx, url, int(latest)-14); err != nil {
		t.Fatal(err)
	}
	if seq := insertBatch(t, conn, "a", "three", false); seq != 0 {
		t.Fatalf("after going down to 14, a/three stored again as seq %d", seq)
	}
	_, err = conn.Exec(ctx, `INSERT INTO batchclaim.batches (service_id, batch_id, payload) VALUES ('a', 'three', '\x00')`)
	if pgErr := (*pgconn.PgError)(nil); !errors.As(err, &pgErr) || pgErr.Code != "23505" {
		t.Fatalf("after going down to 14, a duplicate without ON CONFLICT: %v, want a unique violation", err)
	}
}

// Two transactions that store the same pair at once, or the same ledger id under two
// service_ids: the second waits for the first and stores nothing (and leaves no pair) if it
// commits, or stores the batch if it rolls back, as with a unique index.
func TestBatchKeysConcurrentEnqueues(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url := dbtest.NewDB(t)
	for _, c := range []struct {
		batchID, secondService string
		ledger, commit         bool
	}{
		{batchID: "commit", secondService: "s", commit: true},
		{batchID: "rollback", secondService: "s"},
		{batchID: "ledger-commit", secondService: "s2", ledger: true, commit: true},
		{batchID: "ledger-rollback", secondService: "s2", ledger: true},
	} {
		first, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		second, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		tx, err := first.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO batchclaim.batches (service_id, batch_id, payload, ledger) VALUES ('s', $1, '\x00', $2)`, c.batchID, c.ledger); err != nil {
			t.Fatal(err)
		}
		got := make(chan int64, 1)
		go func() {
			var seq int64
			err := second.QueryRow(ctx, `INSERT INTO batchclaim.batches (service_id, batch_id, payload, ledger) VALUES ($1, $2, '\x01', $3)
				ON CONFLICT DO NOTHING RETURNING seq`, c.secondService, c.batchID, c.ledger).Scan(&seq)
			if err != nil && !errors.Is(err, pgx.ErrNoRows) {
				t.Error(err)
			}
			got <- seq
		}()
		select {
		case seq := <-got:
			t.Fatalf("%s: the second insert returned (seq %d) while the first was open", c.batchID, seq)
		case <-time.After(300 * time.Millisecond):
		}
		if c.commit {
			err = tx.Commit(ctx)
		} else {
			err = tx.Rollback(ctx)
		}
		if err != nil {
			t.Fatal(err)
		}
		seq := <-got
		if c.commit && seq != 0 {
			t.Fatalf("%s: the second insert of a committed pair stored seq %d", c.batchID, seq)
		}
		if !c.commit && seq == 0 {
			t.Fatalf("%s: the second insert of a rolled-back pair stored nothing", c.batchID)
		}
		if n := count(t, first, `SELECT count(*) FROM batchclaim.batches WHERE batch_id = $1`, c.batchID); n != 1 {
			t.Fatalf("%s: %d batches stored, want 1", c.batchID, n)
		}
		if n := count(t, first, `SELECT count(*) FROM batchclaim.batch_keys k WHERE k.batch_id = $1
			AND NOT EXISTS (SELECT 1 FROM batchclaim.batches b WHERE b.seq = k.seq)`, c.batchID); n != 0 {
			t.Fatalf("%s: %d pairs name no batch", c.batchID, n)
		}
		_ = first.Close(ctx)
		_ = second.Close(ctx)
	}
}

// One statement that stores many ledger batches, as an application's bulk INSERT may: the
// ledger ids' uniqueness costs no lock per row, so the statement's size is bounded by the
// server's memory for rows, not by its lock table (max_locks_per_transaction).
func TestBatchKeysBulkLedgerInsert(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, dbtest.NewDB(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	const n = 50_000
	bulk := `INSERT INTO batchclaim.batches (service_id, batch_id, payload, ledger)
		SELECT 's-' || (i % 1000), $1 || i, '\x00', true FROM generate_series(1, $2::int) i
		ON CONFLICT DO NOTHING`
	tag, err := conn.Exec(ctx, bulk, "bulk-", n)
	if err != nil {
		t.Fatalf("one INSERT of %d ledger batches: %v", n, err)
	}
	if tag.RowsAffected() != n {
		t.Fatalf("%d of %d stored", tag.RowsAffected(), n)
	}
	// The same ids again, under other service_ids: every one is refused and leaves nothing.
	again := `INSERT INTO batchclaim.batches (service_id, batch_id, payload, ledger)
		SELECT 'other-' || (i % 7), $1 || i, '\x00', true FROM generate_series(1, $2::int) i
		ON CONFLICT DO NOTHING`
	if tag, err := conn.Exec(ctx, again, "bulk-", n); err != nil || tag.RowsAffected() != 0 {
		t.Fatalf("the same ledger ids under other service_ids: %v, %d stored", err, tag.RowsAffected())
	}
	if k, b := count(t, conn, `SELECT count(*) FROM batchclaim.batch_keys`), count(t, conn, `SELECT count(*) FROM batchclaim.batches`); k != n || b != n {
		t.Fatalf("%d pairs and %d batches, want %d of each", k, b, n)
	}
}
