package migrations_test

import (
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/batchclaim/batchclaim/migrations"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// Up, down and up again round-trip on a fresh database: every down migration removes what its
// up migration made.
func TestUpDownUp(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
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
			WHERE table_schema = 'batchclaim' AND table_name <> 'schema_migrations' ORDER BY table_name`)
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

// finished_at follows state for rows written by hand too: an INSERT of a finished batch takes
// its updated_at, an UPDATE into a terminal state that leaves updated_at alone takes now(), and
// leaving a terminal state clears it; unfinished always follows state (a plain column since
// migration 21, kept by the same trigger), whatever a writer sets it to.
func TestFinishedAtFollowsStateForRowsWrittenByHand(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, dbtest.NewDB(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var seq int64
	if err := conn.QueryRow(ctx, `INSERT INTO batchclaim.batches (service_id, batch_id, payload, state, updated_at)
		VALUES ('svc', 'b', '\x00', 'COMMITTED', '2020-01-01T00:00:00Z') RETURNING seq`).Scan(&seq); err != nil {
		t.Fatal(err)
	}
	check := func(what string, wantFinished bool, wantAt string) {
		t.Helper()
		var unfinished bool
		var at *string
		if err := conn.QueryRow(ctx, `SELECT unfinished, to_char(finished_at AT TIME ZONE 'UTC', 'YYYY-MM-DD')
			FROM batchclaim.batches WHERE seq = $1`, seq).Scan(&unfinished, &at); err != nil {
			t.Fatal(err)
		}
		if unfinished == wantFinished || (at == nil) == wantFinished || (wantAt != "" && (at == nil || *at != wantAt)) {
			t.Fatalf("%s: unfinished %v, finished_at %v; want finished %v at %q", what, unfinished, at, wantFinished, wantAt)
		}
	}
	check("inserted COMMITTED", true, "2020-01-01")
	if _, err := conn.Exec(ctx, `UPDATE batchclaim.batches SET state = 'NEW' WHERE seq = $1`, seq); err != nil {
		t.Fatal(err)
	}
	check("set back to NEW", false, "")
	var today string
	if err := conn.QueryRow(ctx, `UPDATE batchclaim.batches SET state = 'INVALID' WHERE seq = $1
		RETURNING to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD')`, seq).Scan(&today); err != nil {
		t.Fatal(err)
	}
	check("set INVALID", true, today)
	if _, err := conn.Exec(ctx, `UPDATE batchclaim.batches SET unfinished = true WHERE seq = $1`, seq); err != nil {
		t.Fatal(err)
	}
	check("INVALID, set unfinished", true, today)
	if _, err := conn.Exec(ctx, `UPDATE batchclaim.batches SET state = 'DELAYED', unfinished = false, finished_at = now() WHERE seq = $1`, seq); err != nil {
		t.Fatal(err)
	}
	check("DELAYED, set finished", false, "")
}

// Migration 14 keeps the attempt that committed a batch on its batch row only; going down to
// 13 writes those attempts' rows, whole, so the previous schema's log has every attempt.
func TestDownTo13WritesTheCommittedAttempts(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url := dbtest.NewDB(t)
	latest, err := migrations.Latest()
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `
		INSERT INTO batchclaim.batches (service_id, batch_id, payload, state, attempts, claimant, claim_epoch, submitted_at, finished_at,
			attempt_reason, attempt_from, attempt_xid, attempt_latency_ms, attempt_http_status)
		VALUES ('svc', 'done', 'x', 'COMMITTED', 1, gen_random_uuid(), 3, now() - interval '1 second', now(), 'first', 'NEW', pg_current_xact_id(), 2.5, 200),
		       ('svc', 'open', 'x', 'NEW', 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)`); err != nil {
		t.Fatal(err)
	}
	if err := migrations.Down(ctx, url, int(latest)-13); err != nil {
		t.Fatal(err)
	}
	var rows, whole int
	if err := conn.QueryRow(ctx, `SELECT count(*),
		count(*) FILTER (WHERE a.batch_id = 'done' AND a.epoch = 3 AND a.reason = 'first' AND a.from_state = 'NEW' AND a.to_state = 'COMMITTED'
			AND a.outcome = 'done' AND a.started_at = b.submitted_at AND a.finished_at = b.finished_at AND a.latency_ms = 2.5
			AND a.http_status = 200 AND a.marked_xid = b.attempt_xid)
		FROM batchclaim.submission_attempts a JOIN batchclaim.batches b USING (seq)`).Scan(&rows, &whole); err != nil {
		t.Fatal(err)
	}
	if rows != 1 || whole != 1 {
		t.Fatalf("after going down to 13: %d attempt rows, %d of them the committed attempt whole; want 1 and 1", rows, whole)
	}
}
