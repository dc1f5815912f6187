package ingest

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batchclaim/batchclaim/pgdb"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
	"github.com/batchclaim/batchclaim/testkit/testutil"
)

// listener listens on channel on a connection of its own.
func listener(t *testing.T, dbURL, channel string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	if _, err := conn.Exec(t.Context(), "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	return conn
}

func nextNotification(t *testing.T, conn *pgx.Conn) *pgconn.Notification {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	n, err := conn.WaitForNotification(ctx)
	if err != nil {
		t.Fatalf("waiting for a notification: %v", err)
	}
	return n
}

// wakesIdle waits until no wake-up is pending or being sent for pool.
func wakesIdle(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	testutil.WaitFor(t, 10*time.Second, "the wake-ups sent", func() bool {
		_, busy := wakeGroups.Load(wakeKey{pool: pool, schema: pgdb.SchemaDefault})
		return !busy
	})
}

// markerNext checks that the next notification on conn is the marker sent now: every
// notification sent before it has been read.
func markerNext(t *testing.T, pool *pgxpool.Pool, conn *pgx.Conn, channel string) {
	t.Helper()
	if _, err := pool.Exec(t.Context(), `SELECT pg_notify($1, 'marker')`, channel); err != nil {
		t.Fatal(err)
	}
	if n := nextNotification(t, conn); n.Payload != "marker" {
		t.Fatalf("another notification (%q) before the marker", n.Payload)
	}
}

// An enqueue given a pool commits without notifying and wakes the holder once, just after.
// Without the after-commit wake no notification comes; with the trigger still notifying from
// the enqueue's own transaction, two come.
func TestEnqueueOnAPoolWakesOnceAfterItsCommit(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDB(t)
	pool, err := pgxpool.New(t.Context(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	ctx := t.Context()
	free := listener(t, dbURL, "batchclaim_free")
	for _, enqueue := range []func() error{
		func() error { _, err := Enqueue(ctx, pool, "svc", "single", nil); return err },
		func() error {
			_, err := EnqueueMany(ctx, pool, []Job{{ServiceID: "svc", BatchID: "a"}, {ServiceID: "svc-2", BatchID: "b"}})
			return err
		},
	} {
		if err := enqueue(); err != nil {
			t.Fatal(err)
		}
		if n := nextNotification(t, free); n.Payload != "" {
			t.Fatalf("free channel payload %q", n.Payload)
		}
		wakesIdle(t, pool)
		markerNext(t, pool, free, "batchclaim_free")
	}
}

// An enqueue in the caller's transaction notifies when that transaction commits, once, and
// sends nothing after.
func TestEnqueueInATransactionNotifiesAtItsCommit(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDB(t)
	pool, err := pgxpool.New(t.Context(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	ctx := t.Context()
	free := listener(t, dbURL, "batchclaim_free")
	err = pgdb.InTx(ctx, pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
		if _, err := Enqueue(ctx, tx, "svc", "single", nil); err != nil {
			return err
		}
		_, err := EnqueueMany(ctx, tx, []Job{{ServiceID: "svc", BatchID: "a"}, {ServiceID: "svc-2", BatchID: "b"}})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := nextNotification(t, free); n.Payload != "" {
		t.Fatalf("free channel payload %q", n.Payload)
	}
	if _, busy := wakeGroups.Load(wakeKey{pool: pool, schema: pgdb.SchemaDefault}); busy {
		t.Fatal("a wake-up after commit was queued for enqueues in a transaction")
	}
	markerNext(t, pool, free, "batchclaim_free")
}

// The trigger leaves alone a statement that set batchclaim_ingest.wake to after_commit, and
// only for its transaction.
func TestNotifyTriggerSkipsAfterCommitStatements(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDB(t)
	pool, err := pgxpool.New(t.Context(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	ctx := t.Context()
	free := listener(t, dbURL, "batchclaim_free")
	if _, err := pool.Exec(ctx, `INSERT INTO batchclaim.service_id_claims (service_id) VALUES ('svc')`); err != nil {
		t.Fatal(err)
	}
	insert := `INSERT INTO batchclaim.batches (service_id, batch_id, payload) VALUES ('svc', $1, '')`
	err = pgdb.InTx(ctx, pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT set_config('batchclaim_ingest.wake', 'after_commit', true)`); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, insert, "quiet")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	markerNext(t, pool, free, "batchclaim_free")
	if _, err := pool.Exec(ctx, insert, "heard"); err != nil {
		t.Fatal(err)
	}
	if n := nextNotification(t, free); n.Payload != "" {
		t.Fatalf("free channel payload %q", n.Payload)
	}
}

func TestCommitsAlone(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewPool(t)
	tx, err := pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(t.Context()) //nolint:errcheck
	for q, want := range map[pgdb.Querier]bool{
		pool:                                    true,
		pgdb.QuerierInSchema(pool, "elsewhere"): true,
		tx:                                      false,
		pgdb.QuerierInSchema(tx, "elsewhere"):   false,
	} {
		if got := commitsAlone(q); got != want {
			t.Errorf("commitsAlone(%T) = %t", q, got)
		}
	}
}
