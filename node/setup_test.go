package node_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/claims"
	"github.com/batchclaim/batchclaim/dlt"
	"github.com/batchclaim/batchclaim/dlt/dltsim"
	"github.com/batchclaim/batchclaim/ingest"
	"github.com/batchclaim/batchclaim/node"
	"github.com/batchclaim/batchclaim/submitter"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
	"github.com/batchclaim/batchclaim/testkit/history"
	"github.com/batchclaim/batchclaim/testkit/testutil"
)

// env is a database, a ledger simulator and any number of in-process instances.
type env struct {
	t      *testing.T
	url    string
	admin  *pgxpool.Pool
	sim    *dltsim.Sim
	simURL string
	flavor dlt.Flavor
}

func setup(t *testing.T, flavor dlt.Flavor, simCfg dltsim.Config) *env {
	t.Helper()
	url := dbtest.NewDB(t)
	simCfg.Flavor = flavor
	sim, err := dltsim.New(simCfg)
	if err != nil {
		t.Fatal(err)
	}
	base, err := sim.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sim.Close() })
	return &env{t: t, url: url, admin: newPool(t, url), sim: sim, simURL: base, flavor: flavor}
}

func newPool(t testing.TB, url string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 8
	p, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// testClaims: R = 100ms, T1 = 1s, T2 = 4s.
func testClaims(name string) claims.Config {
	return claims.Config{Name: name, RenewInterval: 100 * time.Millisecond, Expiry1: time.Second, Expiry2: 4 * time.Second}
}

// sturdy gives a node twice testClaims' timings, for a test whose steps must not meet a
// fence of its own: on a loaded machine (the race detector, every package's tests at once) a
// node with a local deadline of 0.67 s can miss it right after it registers, and the job it
// marked in flight then waits for its adoption's grace.
func sturdy(c *node.Config) {
	c.Claims = sturdyClaims(c.Claims.Name)
}

// sturdyClaims is sturdy's claims.Config: R = 200ms, T1 = 2s, T2 = 8s.
func sturdyClaims(name string) claims.Config {
	return claims.Config{Name: name, RenewInterval: 200 * time.Millisecond, Expiry1: 2 * time.Second, Expiry2: 8 * time.Second}
}

// start runs an instance until the test ends (or stop is called).
func (e *env) start(name string, tweak func(*node.Config)) (n *node.Node, stop func()) {
	e.t.Helper()
	return e.startOn(e.url, name, tweak)
}

// startOn is start with the instance's database connections going to dbURL.
func (e *env) startOn(dbURL, name string, tweak func(*node.Config)) (n *node.Node, stop func()) {
	e.t.Helper()
	return e.startPool(newPool(e.t, dbURL), name, tweak)
}

// startPool is start on the given pool.
func (e *env) startPool(pool *pgxpool.Pool, name string, tweak func(*node.Config)) (n *node.Node, stop func()) {
	e.t.Helper()
	client, err := dlt.NewClient(dlt.Config{Flavor: e.flavor, URL: e.simURL, Circuit: "circuit0", Service: "service0", RequestTimeout: 2 * time.Second})
	if err != nil {
		e.t.Fatal(err)
	}
	cfg := node.Config{
		Claims: testClaims(name), Submitter: client, Statuses: client,
		SkipValid: client.OrderedOnValid(), Workers: 4, PollInterval: 50 * time.Millisecond,
		UnknownAnswers: 2, UnknownGrace: 2 * time.Second, BackoffBase: 20 * time.Millisecond, BackoffMax: 200 * time.Millisecond,
	}
	if tweak != nil {
		tweak(&cfg)
	}
	n, err = node.New(dbtest.Open(e.t, pool, ""), cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
				e.t.Errorf("%s stopped with %v", name, err)
			}
		})
	}
	e.t.Cleanup(stop)
	return n, stop
}

// enqueue stores services x batches fake batches, interleaved, and returns their ids per service.
func (e *env) enqueue(services, batches int) map[string][]string {
	e.t.Helper()
	ids := map[string][]string{}
	ctx := context.Background()
	for b := range batches {
		for s := range services {
			svc := fmt.Sprintf("svc-%03d", s)
			id, list := dlt.FakeBatch(svc, b)
			if _, err := ingest.Enqueue(ctx, e.admin, svc, id, list); err != nil {
				e.t.Fatal(err)
			}
			ids[svc] = append(ids[svc], id)
		}
	}
	return ids
}

// waitFinished polls (with a deadline) until every batch is COMMITTED or INVALID.
func (e *env) waitFinished(timeout time.Duration) {
	e.t.Helper()
	testutil.WaitFor(e.t, timeout, "every batch finished", func() bool {
		var open int
		err := e.admin.QueryRow(context.Background(), `SELECT count(*) FROM batchclaim.batches WHERE unfinished`).Scan(&open)
		return err == nil && open == 0 // an error (the server restarting) means not yet
	})
}

// logRows logs the rows of query, one line each, for a failed test's log.
func logRows(t testing.TB, pool *pgxpool.Pool, query string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // in a cleanup, t.Context has ended
	defer cancel()
	rows, err := pool.Query(ctx, query)
	if err != nil {
		t.Logf("%s: %v", query, err)
		return
	}
	defer rows.Close()
	for rows.Next() {
		vals, err := rows.Values()
		t.Log(append(vals, err)...)
	}
}

// check runs the invariant checks against the simulator's record and fails on violations.
func (e *env) check() history.Report {
	e.t.Helper()
	l := history.SimLedger(e.sim.Committed(), func(yield func(string, string) bool) {
		for _, p := range e.sim.Posts() {
			if !yield(p.BatchID, p.Effect) {
				return
			}
		}
	})
	rep, err := history.Check(context.Background(), e.admin, l)
	if err != nil {
		e.t.Fatal(err)
	}
	if rep.Lost != 0 || rep.OrderViolations != 0 || rep.DuplicatePostsUnexplained != 0 {
		e.t.Fatalf("invariants violated: lost=%d order=%d unexplained duplicates=%d: %v",
			rep.Lost, rep.OrderViolations, rep.DuplicatePostsUnexplained, rep.Problems)
	}
	return rep
}

func (e *env) effectivePosts(id string) int {
	n := 0
	for _, p := range e.sim.Posts() {
		if p.BatchID == id && history.TookEffect(p.Effect) {
			n++
		}
	}
	return n
}

func (e *env) state(id string) string {
	var s string
	if err := e.admin.QueryRow(context.Background(), `SELECT state FROM batchclaim.batches WHERE batch_id = $1`, id).Scan(&s); err != nil {
		e.t.Fatal(err)
	}
	return s
}

// keyLog is what a test's job Submitters saw: per key, the batch ids of the jobs that
// succeeded, in the order they ended, and each key that had two jobs running at once.
type keyLog struct {
	mu      sync.Mutex
	ran     map[string][]string
	running map[string]bool
	overlap []string
}

func newKeyLog() *keyLog { return &keyLog{ran: map[string][]string{}, running: map[string]bool{}} }

// submitter returns a Submitter whose job takes work and then answers what decide says
// (Done when decide is nil; decide runs under the log's lock); a job answered Done is logged
// as run, by its id, or as # and its payload when it has none.
func (l *keyLog) submitter(work time.Duration, decide func(batchclaim.Batch) batchclaim.Result) submitter.Submitter {
	return submitter.SubmitterFunc(func(ctx context.Context, b batchclaim.Batch) (batchclaim.Result, error) {
		l.mu.Lock()
		if l.running[b.ServiceID] {
			l.overlap = append(l.overlap, b.ServiceID)
		}
		l.running[b.ServiceID] = true
		l.mu.Unlock()
		time.Sleep(work) // the job's own work
		l.mu.Lock()
		defer l.mu.Unlock()
		l.running[b.ServiceID] = false
		res := batchclaim.Result{Verdict: batchclaim.Done}
		if decide != nil {
			res = decide(b)
		}
		if res.Verdict == batchclaim.Done {
			name := b.BatchID
			if name == "" {
				name = "#" + string(b.Payload)
			}
			l.ran[b.ServiceID] = append(l.ran[b.ServiceID], name)
		}
		return res, nil
	})
}
