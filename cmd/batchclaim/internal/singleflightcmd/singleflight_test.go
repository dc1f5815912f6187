package singleflightcmd

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batchclaim/batchclaim/testkit/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// The demo's checker counts what it must: overlapping source calls of one key (a killed
// worker's unfinished call lasting until the kill), values replaced by an older epoch,
// reused epochs, and failed Gets of the survivors.
func TestSingleflightCheckerCounts(t *testing.T) {
	t.Parallel()
	pool, err := pgxpool.New(t.Context(), dbtest.NewDB(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if _, err := pool.Exec(t.Context(), sfDemoSchema); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	calls := []struct {
		worker, key string
		epoch       int64
		start       float64
		end         *float64
	}{
		{"w1", sfVictimKey, 1, 0, nil}, // killed at t=5: ends then
		{"w2", sfVictimKey, 2, 6, sfPtr(7.0)},
		{"w3", "a", 3, 0, sfPtr(2.0)},
		{"w2", "a", 4, 1, sfPtr(3.0)}, // overlaps epoch 3
		{"w2", "b", 5, 0, sfPtr(1.0)},
		{"w3", "b", 5, 2, sfPtr(3.0)},   // reuses epoch 5
		{"w1", "c", 6, 4, nil},          // killed at 5
		{"w3", "c", 7, 4.5, sfPtr(6.0)}, // overlaps the killed call
	}
	for _, c := range calls {
		var end *time.Time
		if c.end != nil {
			e := at(*c.end)
			end = &e
		}
		if _, err := pool.Exec(t.Context(), `INSERT INTO sf_demo_calls (worker, key, epoch, started_at, ended_at) VALUES ($1, $2, $3, $4, $5)`,
			c.worker, c.key, c.epoch, at(c.start), end); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := pool.Exec(t.Context(), `
		INSERT INTO sf_demo_writes (key, old_epoch, new_epoch) VALUES ('a', NULL, 4), ('a', 4, 3), ('b', NULL, 5);
		INSERT INTO sf_demo_workers (name, done, gets, errors, victim_epoch) VALUES
			('w1', false, 10, 0, 0), ('w2', true, 10, 2, 2), ('w3', false, 10, 0, 2)`); err != nil {
		t.Fatal(err)
	}
	s, err := sfCheck(t.Context(), pool, "w1", at(5), 1)
	if err != nil {
		t.Fatal(err)
	}
	if s.ParallelFetches != 2 || s.StaleOverwrites != 1 || s.EpochsReused != 1 || s.LostResults != 3 ||
		s.TakeoverEpoch != 2 || s.TakeoverSeconds != 1 || s.WaitersOfKilledKey != 2 {
		t.Fatalf("checker: %+v", s)
	}
}

func sfPtr[T any](v T) *T { return &v }

// A worker's final report stands: a periodic one that reaches the server after it (sent
// before the worker stopped) changes nothing, so the checker does not count the worker as
// one that never reported its end.
func TestSfFinalReportStands(t *testing.T) {
	t.Parallel()
	pool, err := pgxpool.New(t.Context(), dbtest.NewDB(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if _, err := pool.Exec(t.Context(), sfDemoSchema); err != nil {
		t.Fatal(err)
	}
	report := func(done bool, gets, errs int64) {
		t.Helper()
		if _, err := pool.Exec(t.Context(), sfReportSQL, "w2", done, false, int64(2), gets, errs, int64(0), int64(1), int64(3), int64(1)); err != nil {
			t.Fatal(err)
		}
	}
	report(false, 10, 0) // periodic
	report(false, 20, 0) // periodic, later
	report(true, 30, 0)  // final
	report(false, 25, 1) // a periodic one the server ran last
	var done bool
	var gets, errs int64
	if err := pool.QueryRow(t.Context(), `SELECT done, gets, errors FROM sf_demo_workers WHERE name = 'w2'`).Scan(&done, &gets, &errs); err != nil {
		t.Fatal(err)
	}
	if !done || gets != 30 || errs != 0 {
		t.Fatalf("after the final report and a late periodic one: done %v, gets %d, errors %d; want the final report (true, 30, 0)", done, gets, errs)
	}
}
