package ingest_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batchclaim/batchclaim/ingest"
	"github.com/batchclaim/batchclaim/migrations"
	"github.com/batchclaim/batchclaim/pgdb"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
	"github.com/batchclaim/batchclaim/testkit/testutil"
)

// keyOrder returns the batch ids of a service_id in the order of its queue (pos), with seq
// order checked to be the same.
func keyOrder(t *testing.T, pool *pgxpool.Pool, serviceID string) []string {
	t.Helper()
	rows, err := pool.Query(t.Context(), `SELECT batch_id, seq, pos FROM batchclaim.batches WHERE service_id = $1 ORDER BY pos`, serviceID)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	var lastSeq int64
	for rows.Next() {
		var id string
		var seq, pos int64
		if err := rows.Scan(&id, &seq, &pos); err != nil {
			t.Fatal(err)
		}
		if seq < lastSeq {
			t.Errorf("%s: %s has seq %d after seq %d in pos order", serviceID, id, seq, lastSeq)
		}
		lastSeq = seq
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return ids
}

func TestEnqueueMany(t *testing.T) {
	t.Parallel()

	t.Run("each key's jobs in the order given, claim rows created", func(t *testing.T) {
		t.Parallel()
		ctx, pool := t.Context(), dbtest.NewPool(t)
		var jobs []ingest.Job
		// Neither the service_ids nor a key's batch ids come in their sort order: the
		// statement groups the rows by service_id, and a key's order is still the list's.
		for i := range 30 {
			jobs = append(jobs, ingest.Job{ServiceID: fmt.Sprintf("k%d", 2-i%3), BatchID: fmt.Sprintf("j%02d", 29-i), Payload: []byte{byte(i)}})
		}
		stored, err := ingest.EnqueueMany(ctx, pool, jobs)
		if err != nil {
			t.Fatal(err)
		}
		if len(stored) != len(jobs) {
			t.Fatalf("%d results for %d jobs", len(stored), len(jobs))
		}
		for i, s := range stored {
			if !s.New || s.BatchID != jobs[i].BatchID || s.Seq == 0 {
				t.Errorf("job %d: %+v", i, s)
			}
			if i >= 3 && s.Seq <= stored[i-3].Seq {
				t.Errorf("job %d of %s: seq %d not after %d", i, jobs[i].ServiceID, s.Seq, stored[i-3].Seq)
			}
		}
		for k := range 3 {
			var want []string
			for i := k; i < 30; i += 3 {
				want = append(want, jobs[i].BatchID)
			}
			if got := keyOrder(t, pool, jobs[k].ServiceID); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("%s in queue order %v, want %v", jobs[k].ServiceID, got, want)
			}
		}
		var claimRows int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM batchclaim.service_id_claims WHERE service_id IN ('k0', 'k1', 'k2')`).Scan(&claimRows); err != nil {
			t.Fatal(err)
		}
		if claimRows != 3 {
			t.Errorf("%d claim rows, want 3", claimRows)
		}
	})

	t.Run("duplicates are skipped and reported with the stored job's seq", func(t *testing.T) {
		t.Parallel()
		ctx, pool := t.Context(), dbtest.NewPool(t)
		old, err := ingest.Enqueue(ctx, pool, "k", "stored-before", []byte("old"))
		if err != nil {
			t.Fatal(err)
		}
		stored, err := ingest.EnqueueMany(ctx, pool, []ingest.Job{
			{ServiceID: "k", BatchID: "a", Payload: []byte("a")},
			{ServiceID: "k", BatchID: "stored-before", Payload: []byte("new")},
			{ServiceID: "k", BatchID: "a", Payload: []byte("a again")},
			{ServiceID: "other", BatchID: "a", Payload: []byte("another key's a")},
		})
		if err != nil {
			t.Fatal(err)
		}
		want := []ingest.Stored{
			{BatchID: "a", Seq: stored[0].Seq, New: true},
			{BatchID: "stored-before", Seq: old.Seq},
			{BatchID: "a", Seq: stored[0].Seq},
			{BatchID: "a", Seq: stored[3].Seq, New: true},
		}
		if fmt.Sprint(stored) != fmt.Sprint(want) || stored[0].Seq == stored[3].Seq {
			t.Fatalf("stored %+v, want %+v", stored, want)
		}
		var payload []byte
		if err := pool.QueryRow(ctx, `SELECT payload FROM batchclaim.batches WHERE seq = $1`, old.Seq).Scan(&payload); err != nil || string(payload) != "old" {
			t.Errorf("the job stored before has payload %q (%v), want it unchanged", payload, err)
		}
		if got := keyOrder(t, pool, "k"); fmt.Sprint(got) != "[stored-before a]" {
			t.Errorf("k holds %v", got)
		}
	})

	t.Run("jobs without an id are always stored, in order, and never registered", func(t *testing.T) {
		t.Parallel()
		ctx, pool := t.Context(), dbtest.NewPool(t)
		first, err := ingest.Enqueue(ctx, pool, "k", "", []byte("single"))
		if err != nil || !first.New || first.BatchID != "" {
			t.Fatalf("single enqueue without an id: %+v, %v; want it stored", first, err)
		}
		again, err := ingest.Enqueue(ctx, pool, "k", "", []byte("single"))
		if err != nil || !again.New || again.Seq <= first.Seq {
			t.Fatalf("the same enqueue again: %+v, %v; want a second job after seq %d", again, err, first.Seq)
		}
		// Jobs with and without ids of two keys, interleaved; the keys' jobs without an id
		// carry their place in the list as payload.
		var jobs []ingest.Job
		for i := range 12 {
			j := ingest.Job{ServiceID: fmt.Sprintf("k%d", i%2), Payload: []byte(fmt.Sprint(i))}
			if i%3 == 0 {
				j.BatchID = fmt.Sprintf("id%d", i)
			}
			jobs = append(jobs, j)
		}
		jobs = append(jobs, jobs[1], jobs[0]) // a job without an id again is new; with one, a duplicate
		stored, err := ingest.EnqueueMany(ctx, pool, jobs)
		if err != nil {
			t.Fatal(err)
		}
		for i, s := range stored {
			want := jobs[i].BatchID == "" || i < 12
			if s.New != want || s.BatchID != jobs[i].BatchID || s.Seq == 0 {
				t.Errorf("job %d (%+v): %+v, want New %v", i, jobs[i], s, want)
			}
		}
		if stored[13].Seq != stored[0].Seq || stored[12].Seq == stored[1].Seq {
			t.Errorf("repeats: %+v of %+v and %+v of %+v", stored[13], stored[0], stored[12], stored[1])
		}
		for k := range 2 {
			svc := fmt.Sprintf("k%d", k)
			rows, err := pool.Query(ctx, `SELECT seq, batch_id, payload FROM batchclaim.batches WHERE service_id = $1 ORDER BY pos`, svc)
			if err != nil {
				t.Fatal(err)
			}
			var got, want []string
			for rows.Next() {
				var seq int64
				var id string
				var payload []byte
				if err := rows.Scan(&seq, &id, &payload); err != nil {
					t.Fatal(err)
				}
				got = append(got, fmt.Sprintf("%d:%s:%s", seq, id, payload))
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			for i, j := range jobs {
				if j.ServiceID == svc && stored[i].New {
					want = append(want, fmt.Sprintf("%d:%s:%s", stored[i].Seq, j.BatchID, j.Payload))
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("%s in queue order %v, want %v (each job's seq as reported)", svc, got, want)
			}
		}
		var keys int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM batchclaim.batch_keys WHERE batch_id = ''`).Scan(&keys); err != nil || keys != 0 {
			t.Errorf("%d pairs without an id registered (%v), want none", keys, err)
		}
		// An application's own INSERT without an id goes through the key trigger's condition
		// the same way; a ledger batch without one is registered, so a second is refused.
		for range 2 {
			if _, err := pool.Exec(ctx, `INSERT INTO batchclaim.batches (service_id, batch_id, payload) VALUES ('app', '', '')`); err != nil {
				t.Fatal(err)
			}
		}
		var appRows int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM batchclaim.batches WHERE service_id = 'app'`).Scan(&appRows); err != nil || appRows != 2 {
			t.Errorf("%d of the application's two inserts without an id stored (%v)", appRows, err)
		}
		for i, want := range []int64{1, 0} {
			tag, err := pool.Exec(ctx, `INSERT INTO batchclaim.batches (service_id, batch_id, payload, ledger) VALUES ('ledger', '', '', true)`)
			if err != nil || tag.RowsAffected() != want {
				t.Errorf("ledger insert %d without an id: %d rows (%v), want %d", i, tag.RowsAffected(), err, want)
			}
		}
	})

	t.Run("on a schema before jobs without ids, the second one fails instead of passing as a repeat", func(t *testing.T) {
		t.Parallel()
		ctx, url := t.Context(), dbtest.NewDB(t)
		latest, err := migrations.Latest()
		if err != nil {
			t.Fatal(err)
		}
		if err := migrations.Down(ctx, url, int(latest)-21); err != nil { // to 21: the key trigger registers an empty id
			t.Fatal(err)
		}
		pool, err := pgxpool.New(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		if st, err := ingest.Enqueue(ctx, pool, "k", "", nil); err != nil || !st.New {
			t.Fatalf("first job without an id: %+v, %v", st, err)
		}
		if st, err := ingest.Enqueue(ctx, pool, "k", "", nil); err == nil || !strings.Contains(err.Error(), "migrate up") {
			t.Fatalf("second job without an id on schema 21: %+v, %v; want an error that asks for the migration", st, err)
		}
	})

	t.Run("options, and a job without a payload is stored empty", func(t *testing.T) {
		t.Parallel()
		ctx, pool := t.Context(), dbtest.NewPool(t)
		at := time.Date(2100, 1, 2, 3, 4, 5, 0, time.UTC)
		stored, err := ingest.EnqueueMany(ctx, pool, []ingest.Job{
			{ServiceID: "k", BatchID: "plain"},
			{ServiceID: "k", BatchID: "later", Options: []ingest.EnqueueOption{ingest.RunAt(at), ingest.MaxAttempts(3),
				ingest.Kind("email"), ingest.Timeout(1500 * time.Millisecond)}},
		})
		if err != nil {
			t.Fatal(err)
		}
		for i, s := range stored {
			var runAt *time.Time
			var maxAttempts *int32
			var kind *string
			var timeoutMs *int64
			var payload []byte
			if err := pool.QueryRow(ctx, `SELECT next_attempt_at, max_attempts, kind, timeout_ms, payload FROM batchclaim.batches WHERE seq = $1`, s.Seq).
				Scan(&runAt, &maxAttempts, &kind, &timeoutMs, &payload); err != nil {
				t.Fatal(err)
			}
			switch {
			case i == 0 && (runAt != nil || maxAttempts != nil || kind != nil || timeoutMs != nil || payload == nil || len(payload) != 0):
				t.Errorf("plain job: run at %v, max attempts %v, kind %v, timeout %v, payload %v", runAt, maxAttempts, kind, timeoutMs, payload)
			case i == 1 && (runAt == nil || !runAt.Equal(at) || maxAttempts == nil || *maxAttempts != 3 ||
				kind == nil || *kind != "email" || timeoutMs == nil || *timeoutMs != 1500):
				t.Errorf("later job: run at %v, max attempts %v, kind %v, timeout %v", runAt, maxAttempts, kind, timeoutMs)
			}
		}
	})

	t.Run("bad input stores nothing", func(t *testing.T) {
		t.Parallel()
		ctx, pool := t.Context(), dbtest.NewPool(t)
		for name, jobs := range map[string][]ingest.Job{
			"bad service_id":   {{ServiceID: "k", BatchID: "ok"}, {ServiceID: " k", BatchID: "x"}},
			"max attempts < 1": {{ServiceID: "k", BatchID: "ok"}, {ServiceID: "k", BatchID: "x", Options: []ingest.EnqueueOption{ingest.MaxAttempts(0)}}},
			"negative timeout": {{ServiceID: "k", BatchID: "ok"}, {ServiceID: "k", BatchID: "x", Options: []ingest.EnqueueOption{ingest.Timeout(-time.Second)}}},
		} {
			if _, err := ingest.EnqueueMany(ctx, pool, jobs); err == nil {
				t.Errorf("%s: no error", name)
			}
		}
		if got, err := ingest.EnqueueMany(ctx, pool, nil); err != nil || len(got) != 0 {
			t.Errorf("no jobs: %v, %v", got, err)
		}
		var n int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM batchclaim.batches`).Scan(&n); err != nil || n != 0 {
			t.Errorf("%d jobs stored (%v), want none", n, err)
		}
	})

	t.Run("an error in the statement stores nothing, of any key", func(t *testing.T) {
		t.Parallel()
		ctx, pool := t.Context(), dbtest.NewPool(t)
		// Another transaction holds k2's enqueue lock; the statement gives up waiting for it
		// after it stored nothing yet, or everything but k2's job: either way nothing stays.
		holder, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer holder.Rollback(ctx) //nolint:errcheck
		if _, err := ingest.Enqueue(ctx, holder, "k2", "held", nil); err != nil {
			t.Fatal(err)
		}
		err = pgdb.InTx(ctx, pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `SET LOCAL lock_timeout = '200ms'`); err != nil {
				return err
			}
			_, err := ingest.EnqueueMany(ctx, tx, []ingest.Job{{ServiceID: "k1", BatchID: "a"}, {ServiceID: "k2", BatchID: "b"}, {ServiceID: "k3", BatchID: "c"}})
			return err
		})
		if !pgdb.LockTimeout(err) {
			t.Fatalf("err = %v, want a lock timeout", err)
		}
		_ = holder.Rollback(ctx)
		var n int
		if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM batchclaim.batches) + (SELECT count(*) FROM batchclaim.batch_keys)`).Scan(&n); err != nil || n != 0 {
			t.Errorf("%d rows left (%v), want none", n, err)
		}
	})

	t.Run("order is commit order against single enqueues", func(t *testing.T) {
		t.Parallel()
		ctx, pool := t.Context(), dbtest.NewPool(t)
		// A transaction enqueues k's "first" and stays open: the set statement waits for it
		// and stores its k jobs after "first" once it commits.
		first, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer first.Rollback(ctx) //nolint:errcheck
		if _, err := ingest.Enqueue(ctx, first, "k", "first", nil); err != nil {
			t.Fatal(err)
		}
		// A set in a transaction of its own, left open once stored: a single enqueue of k
		// after it waits for its commit.
		set, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer set.Rollback(ctx) //nolint:errcheck
		setDone := make(chan error, 1)
		go func() {
			_, err := ingest.EnqueueMany(ctx, set, []ingest.Job{{ServiceID: "other", BatchID: "o"}, {ServiceID: "k", BatchID: "set-1"}, {ServiceID: "k", BatchID: "set-2"}})
			setDone <- err
		}()
		waitLockWaiters(t, pool, 1)
		if err := first.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-setDone; err != nil {
			t.Fatal(err)
		}
		lastDone := make(chan error, 1)
		go func() {
			_, err := ingest.Enqueue(ctx, pool, "k", "last", nil)
			lastDone <- err
		}()
		waitLockWaiters(t, pool, 1)
		if err := set.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-lastDone; err != nil {
			t.Fatal(err)
		}
		if got := keyOrder(t, pool, "k"); fmt.Sprint(got) != "[first set-1 set-2 last]" {
			t.Errorf("k in queue order %v, want [first set-1 set-2 last]", got)
		}
	})

	t.Run("two sets over the same keys in opposite orders do not deadlock", func(t *testing.T) {
		t.Parallel()
		ctx, pool := t.Context(), dbtest.NewPool(t)
		var keys []string
		for i := range 50 {
			keys = append(keys, fmt.Sprintf("key-%02d", i))
		}
		errs := make(chan error, 2)
		for r := range 2 {
			go func() {
				var jobs []ingest.Job
				for i := range keys {
					k := keys[i]
					if r == 1 {
						k = keys[len(keys)-1-i]
					}
					jobs = append(jobs, ingest.Job{ServiceID: k, BatchID: fmt.Sprintf("r%d", r)})
				}
				errs <- pgdb.InTx(ctx, pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
					_, err := ingest.EnqueueMany(ctx, tx, jobs)
					return err
				})
			}()
		}
		for range 2 {
			if err := <-errs; err != nil {
				t.Error(err)
			}
		}
	})

	t.Run("the set registers its keys itself; later inserts of its transaction still go through the key trigger", func(t *testing.T) {
		t.Parallel()
		ctx, pool := t.Context(), dbtest.NewPool(t)
		tx, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx) //nolint:errcheck
		if _, err := tx.Exec(ctx, `SET LOCAL track_functions = 'pl'`); err != nil {
			t.Fatal(err)
		}
		triggerCalls := func() (n int64) {
			t.Helper()
			if err := tx.QueryRow(ctx, `SELECT coalesce(pg_stat_get_xact_function_calls('batchclaim.batchclaim_batch_key'::regproc), 0)`).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n
		}
		jobs := make([]ingest.Job, 100)
		for i := range jobs {
			jobs[i] = ingest.Job{ServiceID: fmt.Sprintf("k%d", i%7), BatchID: fmt.Sprint(i)}
		}
		jobs = append(jobs, jobs[3]) // a duplicate within the set: the registration's second path
		stored, err := ingest.EnqueueMany(ctx, tx, jobs)
		if err != nil {
			t.Fatal(err)
		}
		if n := triggerCalls(); n != 0 || !stored[3].New || stored[100].New || stored[100].Seq != stored[3].Seq {
			t.Fatalf("the set called the per-row key trigger %d times (want 0); job 3 %+v, its repeat %+v", n, stored[3], stored[100])
		}
		// The same pairs again in the same transaction: a single enqueue, an application's
		// own INSERT and a second set all find them taken.
		again, err := ingest.Enqueue(ctx, tx, "k3", "3", nil)
		if err != nil || again.New || again.Seq != stored[3].Seq {
			t.Fatalf("single enqueue of a pair the set stored: %+v, %v; want it reported stored", again, err)
		}
		tag, err := tx.Exec(ctx, `INSERT INTO batchclaim.batches (service_id, batch_id, payload) VALUES ('k4', '4', '')`)
		if err != nil || tag.RowsAffected() != 0 {
			t.Fatalf("an application's INSERT of a pair the set stored: %v rows, %v; want none", tag.RowsAffected(), err)
		}
		if n := triggerCalls(); n != 2 {
			t.Errorf("the key trigger ran %d times for the two later inserts, want 2", n)
		}
		second, err := ingest.EnqueueMany(ctx, tx, jobs[:10])
		if err != nil {
			t.Fatal(err)
		}
		for i, st := range second {
			if st.New || st.Seq != stored[i].Seq {
				t.Errorf("second set, job %d: %+v; want it reported stored as %d", i, st, stored[i].Seq)
			}
		}
		var rows int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM batchclaim.batches`).Scan(&rows); err != nil || rows != 100 {
			t.Errorf("%d rows stored (%v), want 100", rows, err)
		}
	})

	t.Run("a pair stored by a transaction this one cannot see fails the call", func(t *testing.T) {
		t.Parallel()
		ctx, pool := t.Context(), dbtest.NewPool(t)
		tx, err := pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)                              //nolint:errcheck
		if _, err := tx.Exec(ctx, `SELECT 1`); err != nil { // the snapshot is taken
			t.Fatal(err)
		}
		if _, err := ingest.Enqueue(ctx, pool, "k", "x", nil); err != nil {
			t.Fatal(err)
		}
		if _, err := ingest.EnqueueMany(ctx, tx, []ingest.Job{{ServiceID: "k", BatchID: "x"}}); err == nil || errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want the job reported stored by a transaction this one does not see", err)
		}
	})
}

// waitLockWaiters waits until n sessions of the test's database wait on a lock.
func waitLockWaiters(t *testing.T, pool *pgxpool.Pool, n int) {
	t.Helper()
	testutil.WaitFor(t, 10*time.Second, fmt.Sprintf("%d sessions waiting on a lock", n), func() bool {
		var waiting int
		_ = pool.QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND state = 'active'`).Scan(&waiting)
		return waiting >= n
	})
}
