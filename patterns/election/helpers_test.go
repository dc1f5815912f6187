package election_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/patterns/election"
	"github.com/batchclaim/batchclaim/pgdb"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
	"github.com/batchclaim/batchclaim/testkit/testutil"
)

// Test timings: generous enough for a loaded machine (a primary steps down when a renewal
// is not confirmed within T - I = 1.2s of its sending).
const (
	testInterval = 300 * time.Millisecond
	testTimeout  = 1500 * time.Millisecond
)

// testDB returns a pool on a fresh migrated database with the table the fenced writes of
// the tests go to.
func testDB(t *testing.T) (*pgxpool.Pool, string) {
	t.Helper()
	url := dbtest.NewDB(t)
	pool, err := pgxpool.New(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if _, err := pool.Exec(t.Context(), `CREATE TABLE test_writes (
		id bigserial PRIMARY KEY, name text NOT NULL, epoch bigint NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp())`); err != nil {
		t.Fatal(err)
	}
	return pool, url
}

// recorder collects what an elector's hooks report, with the local (monotonic) time.
type recorder struct {
	mu      sync.Mutex
	elected []stamped
	down    []stamped
	changed chan struct{}
}

type stamped struct {
	term election.Term
	why  election.StepDownReason
	at   time.Time
}

func newRecorder() *recorder { return &recorder{changed: make(chan struct{}, 1000)} }

func (r *recorder) hooks(cfg *election.Config) {
	cfg.OnElected = func(_ context.Context, t election.Term) {
		r.mu.Lock()
		r.elected = append(r.elected, stamped{term: t, at: time.Now()})
		r.mu.Unlock()
		r.changed <- struct{}{}
	}
	cfg.OnSteppedDown = func(t election.Term, why election.StepDownReason) {
		r.mu.Lock()
		r.down = append(r.down, stamped{term: t, why: why, at: time.Now()})
		r.mu.Unlock()
		r.changed <- struct{}{}
	}
}

func (r *recorder) snapshot() (elected, down []stamped) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]stamped(nil), r.elected...), append([]stamped(nil), r.down...)
}

// startElector runs an elector for roles until the test ends (or stop is called).
func startElector(t *testing.T, db pgdb.DB, name string, roles []string, tweak func(*election.Config)) (el *election.Elector, rec *recorder, stop func()) {
	t.Helper()
	rec = newRecorder()
	cfg := election.Config{Roles: roles, Name: name, HeartbeatInterval: testInterval, Timeout: testTimeout}
	rec.hooks(&cfg)
	if tweak != nil {
		tweak(&cfg)
	}
	el, err := election.New(db, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = el.Run(ctx) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return el, rec, stop
}

// primaryIs reports whether the database says name is the live primary of role.
func primaryIs(t *testing.T, pool *pgxpool.Pool, role, name string) (election.Term, bool) {
	t.Helper()
	p, err := election.GetPrimary(t.Context(), pool, role)
	if errors.Is(err, batchclaim.ErrNotFound) {
		return election.Term{}, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return p, p.Name == name
}

// electedAt returns the database time at which role's term epoch was elected.
func electedAt(t *testing.T, pool *pgxpool.Pool, role string, epoch int64) time.Time {
	t.Helper()
	var at time.Time
	if err := pool.QueryRow(t.Context(), `SELECT at FROM batchclaim.election_events WHERE role = $1 AND epoch = $2 AND event = 'elected'`,
		role, epoch).Scan(&at); err != nil {
		t.Fatalf("elected event of %s@%d: %v", role, epoch, err)
	}
	return at
}

// startHelper runs helperMain in a process of its own (this test binary).
func startHelper(t *testing.T, url string) *testutil.Child {
	t.Helper()
	return testutil.StartChild(t, testutil.ChildConfig{Name: "helper", Env: []string{helperEnv + "=" + url}, OwnStderr: true})
}
