package periodic_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batchclaim/batchclaim/ingest"
	"github.com/batchclaim/batchclaim/periodic"
	"github.com/batchclaim/batchclaim/pgdb"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
	"github.com/batchclaim/batchclaim/testkit/testutil"
)

// ticks is a schedule of given ticks (in order) and nothing after the last.
type ticks []time.Time

func (s ticks) Next(t time.Time) time.Time {
	for _, x := range s {
		if x.After(t) {
			return x
		}
	}
	return time.Time{}
}

func (s ticks) String() string { return fmt.Sprintf("ticks %v", []time.Time(s)) }

// record collects what the instances of a test stored: tick -> one entry per Enqueued call.
type record struct {
	mu     sync.Mutex
	stored map[time.Time][]string // "<instance> new=<bool>"
}

func (r *record) enqueued(instance string) func(string, time.Time, ingest.Stored) {
	return func(_ string, tick time.Time, st ingest.Stored) {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.stored == nil {
			r.stored = map[time.Time][]string{}
		}
		r.stored[tick.UTC()] = append(r.stored[tick.UTC()], fmt.Sprintf("%s new=%v", instance, st.New))
	}
}

func (r *record) get() map[time.Time][]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[time.Time][]string{}
	for k, v := range r.stored {
		out[k] = append([]string(nil), v...)
	}
	return out
}

func newPool(t testing.TB, url string) *pgxpool.Pool {
	t.Helper()
	p, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// start runs a Scheduler for job on its own pool until the test ends or stop is called.
func start(t *testing.T, url string, job periodic.Job, rec *record, name string) (s *periodic.Scheduler, stop func()) {
	t.Helper()
	s, err := periodic.New(dbtest.Open(t, newPool(t, url), ""), periodic.Config{Jobs: []periodic.Job{job}, Enqueued: rec.enqueued(name),
		Interval: time.Second, LockTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Run(ctx) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return s, stop
}

// jobs returns the ids of the jobs stored under key, in order.
func jobs(t *testing.T, pool *pgxpool.Pool, key string) []string {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT batch_id FROM batchclaim.batches WHERE service_id = $1 ORDER BY seq`, key)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		out = append(out, id)
	}
	return out
}

func dbNow(t *testing.T, pool *pgxpool.Pool) time.Time {
	t.Helper()
	var now time.Time
	if err := pool.QueryRow(context.Background(), `SELECT now()`).Scan(&now); err != nil {
		t.Fatal(err)
	}
	return now
}

// Three instances with the same job store each tick once: one of them takes it, the others
// find it taken. No tick is stored twice, not even as a repeat the enqueue's deduplication
// would hide.
func TestEveryTickOnceAcrossInstances(t *testing.T) {
	t.Parallel()
	url := dbtest.NewDB(t)
	admin := newPool(t, url)
	rec := &record{}
	job := periodic.Job{Name: "heartbeat", Schedule: periodic.Every(time.Second), Payload: []byte("beat")}
	var stops []func()
	for _, name := range []string{"a", "b", "c"} {
		_, stop := start(t, url, job, rec, name)
		stops = append(stops, stop)
	}
	testutil.WaitFor(t, 60*time.Second, "three ticks stored", func() bool { return len(jobs(t, admin, "periodic/heartbeat")) >= 3 })
	for _, stop := range stops {
		stop()
	}
	stored := rec.get()
	ids := jobs(t, admin, "periodic/heartbeat")
	if len(ids) != len(stored) {
		t.Errorf("%d jobs stored, %d ticks taken: %v / %v", len(ids), len(stored), ids, stored)
	}
	for tick, by := range stored {
		if len(by) != 1 || !strings.HasSuffix(by[0], "new=true") {
			t.Errorf("tick %s stored by %v; want once, new", tick.Format(time.RFC3339), by)
		}
	}
	for _, id := range ids {
		tick, err := time.Parse(time.RFC3339, strings.TrimPrefix(id, "periodic/heartbeat/"))
		if err != nil || len(stored[tick]) != 1 {
			t.Errorf("job %s: not a tick one instance took (%v)", id, err)
		}
	}
	list, err := periodic.List(t.Context(), admin)
	if err != nil || len(list) != 1 || list[0].LastTick == nil || list[0].NextRun == nil || !list[0].NextRun.After(*list[0].LastTick) ||
		list[0].LastSeq == 0 || list[0].Schedule != "every 1s" {
		t.Fatalf("List: %+v (%v); want the job with its last tick, its job and a later next run", list, err)
	}
}

// After downtime only the latest tick that came is stored, and a tick once stored is never
// stored again, whoever starts later and however old its job is (retention may have
// deleted it).
func TestMissedTicksAndRestart(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url := dbtest.NewDB(t)
	admin := newPool(t, url)
	job := periodic.Job{Name: "report", Schedule: periodic.Every(time.Minute), ServiceID: "reports"}
	s, err := periodic.New(dbtest.Open(t, admin, ""), periodic.Config{Jobs: []periodic.Job{job}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Register(ctx); err != nil {
		t.Fatal(err)
	}
	// The instances were down for ten minutes since the last tick stored.
	if _, err := admin.Exec(ctx, `UPDATE batchclaim.periodic_jobs SET last_tick = date_trunc('minute', now()) - interval '10 minutes' WHERE name = 'report'`); err != nil {
		t.Fatal(err)
	}
	before := dbNow(t, admin)
	if _, err := s.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	ids := jobs(t, admin, "reports")
	var last time.Time
	if err := admin.QueryRow(ctx, `SELECT last_tick FROM batchclaim.periodic_jobs WHERE name = 'report'`).Scan(&last); err != nil {
		t.Fatal(err)
	}
	if len(ids) != 1 || ids[0] != periodic.TickID("report", last) || last.Before(before.Truncate(time.Minute)) {
		t.Fatalf("after ten missed ticks: jobs %v, last tick %s; want one job, for the latest tick", ids, last)
	}
	// A second instance starting now, and the first one again: nothing more until the next tick.
	other, err := periodic.New(dbtest.Open(t, newPool(t, url), ""), periodic.Config{Jobs: []periodic.Job{job}})
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Register(ctx); err != nil {
		t.Fatal(err)
	}
	for _, x := range []*periodic.Scheduler{other, s} {
		if _, err := x.RunOnce(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := admin.Exec(ctx, `DELETE FROM batchclaim.batches WHERE service_id = 'reports'`); err != nil { // retention's work
		t.Fatal(err)
	}
	if _, err := other.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if got := jobs(t, admin, "reports"); len(got) != 0 && dbNow(t, admin).Sub(last) < time.Minute {
		t.Errorf("the tick stored once was stored again: %v", got)
	}
}

// An instance stopped in the middle of a tick (Run's context ends after it took the tick and
// before it committed) finishes the tick: the job is stored once and Enqueued is called for
// it, instead of a commit cut off by the cancellation leaving a stored job nobody reported.
func TestStopMidTickFinishesTheTick(t *testing.T) {
	t.Parallel()
	url := dbtest.NewDB(t)
	admin := newPool(t, url)
	rec := &record{}
	job := periodic.Job{Name: "beat", Schedule: periodic.Every(time.Second)}
	s, err := periodic.New(dbtest.Open(t, newPool(t, url), ""), periodic.Config{Jobs: []periodic.Job{job}, Enqueued: rec.enqueued("a")})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	periodic.SetMidTick(s, func(string, time.Time) { cancel() })
	if err := s.Run(ctx); err != context.Canceled {
		t.Fatalf("Run: %v; want context.Canceled", err)
	}
	ids, stored := jobs(t, admin, "periodic/beat"), rec.get()
	if len(ids) != 1 || len(stored) != 1 {
		t.Fatalf("stopped mid-tick: jobs %v, Enqueued calls %v; want one job, reported once", ids, stored)
	}
	for tick, by := range stored {
		if ids[0] != periodic.TickID("beat", tick) || len(by) != 1 {
			t.Errorf("job %s, Enqueued for %s by %v; want the same tick, once", ids[0], tick.Format(time.RFC3339), by)
		}
	}
}

// An instance killed in the middle of a tick (it took the tick and stored its job, and had
// not committed) loses nothing: its transaction rolls back, the instances waiting on the
// tick's row go on, and exactly one of them stores the tick.
func TestLeaderKilledMidTick(t *testing.T) {
	t.Parallel()
	url := dbtest.NewDB(t)
	admin := newPool(t, url)
	// One tick, a little ahead, and none after it for a long while: the tick cannot be
	// passed over for a later one however long the takeover takes.
	tick := dbNow(t, admin).Add(2 * time.Second).Truncate(time.Second)
	schedule := ticks{tick, tick.Add(24 * time.Hour)}
	leader := testutil.StartChild(t, testutil.ChildConfig{Name: "leader", Env: []string{childEnv + "=" + url, tickEnv + "=" + tick.Format(time.RFC3339)}})
	if line, ok := leader.Line(0, 60*time.Second); !ok || !strings.HasPrefix(line, "holding ") {
		t.Fatalf("the leader did not take the tick: %q", leader.Output())
	}
	rec := &record{}
	job := periodic.Job{Name: "nightly", Schedule: schedule, Payload: []byte("x")}
	for _, name := range []string{"b", "c"} {
		start(t, url, job, rec, name)
	}
	testutil.WaitFor(t, 30*time.Second, "an instance waiting for the leader's row lock", func() bool {
		var waiting int
		err := admin.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting)
		return err == nil && waiting > 0
	})
	if n := len(jobs(t, admin, "periodic/nightly")); n != 0 {
		t.Fatalf("%d jobs visible while the leader holds the tick uncommitted", n)
	}
	if err := leader.Cmd.Process.Kill(); err != nil { // kill -9, in the middle of the tick
		t.Fatal(err)
	}
	testutil.WaitFor(t, 30*time.Second, "the tick stored by another instance", func() bool { return len(jobs(t, admin, "periodic/nightly")) > 0 })
	// Give the other instance every chance to store it a second time.
	for _, s := range []string{"b2", "c2"} {
		x, err := periodic.New(dbtest.Open(t, newPool(t, url), ""), periodic.Config{Jobs: []periodic.Job{job}, Enqueued: rec.enqueued(s)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := x.RunOnce(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	ids := jobs(t, admin, "periodic/nightly")
	stored := rec.get()
	if len(ids) != 1 || ids[0] != periodic.TickID("nightly", tick) || len(stored) != 1 || len(stored[tick.UTC()]) != 1 {
		t.Fatalf("after the leader died mid-tick: jobs %v, stored %v; want the tick stored once", ids, stored)
	}
}

const (
	childEnv = "PERIODIC_TEST_CHILD_URL"
	tickEnv  = "PERIODIC_TEST_TICK"
)

func childURL() string { return os.Getenv(childEnv) }

// runChild is the leader of TestLeaderKilledMidTick: it runs the job until its tick, says
// "holding <tick>" once it took the tick and stored its job, and waits there, uncommitted,
// until it is killed.
func runChild() {
	tick, err := time.Parse(time.RFC3339, os.Getenv(tickEnv))
	if err != nil {
		panic(err)
	}
	pool, err := pgxpool.New(context.Background(), childURL())
	if err != nil {
		panic(err)
	}
	job := periodic.Job{Name: "nightly", Schedule: ticks{tick, tick.Add(24 * time.Hour)}, Payload: []byte("x")}
	db, err := pgdb.Open(pool, "")
	if err != nil {
		panic(err)
	}
	s, err := periodic.New(db, periodic.Config{Jobs: []periodic.Job{job}, IdleTimeout: time.Hour})
	if err != nil {
		panic(err)
	}
	periodic.SetMidTick(s, func(_ string, t time.Time) {
		fmt.Printf("holding %s\n", t.Format(time.RFC3339))
		select {}
	})
	_ = s.Run(context.Background())
}
