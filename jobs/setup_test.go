package jobs_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batchclaim/batchclaim/claims"
	"github.com/batchclaim/batchclaim/jobs"
	"github.com/batchclaim/batchclaim/node"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
	"github.com/batchclaim/batchclaim/testkit/testutil"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// bundle is a test's database and what it reads there.
type bundle struct {
	t    *testing.T
	url  string
	pool *pgxpool.Pool // the test's own, for inserts and reads
}

func setup(t *testing.T) *bundle {
	t.Helper()
	url := dbtest.NewDB(t)
	return &bundle{t: t, url: url, pool: newPool(t, url)}
}

func newPool(t testing.TB, url string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// run starts a node named name whose Submitter is w until the test ends: R = 100ms,
// T1 = 3s, T2 = 12s (a loaded machine's pauses do not fence it), a short backoff, at most 5
// attempts a job; tweak changes the rest.
func (b *bundle) run(name string, w *jobs.Workers, tweak func(*node.Config)) *node.Node {
	b.t.Helper()
	cfg := node.Config{
		Claims:    claims.Config{Name: name, RenewInterval: 100 * time.Millisecond, Expiry1: 3 * time.Second, Expiry2: 12 * time.Second},
		Submitter: w, MaxAttempts: 5, BackoffBase: 10 * time.Millisecond, BackoffMax: 50 * time.Millisecond,
	}
	if tweak != nil {
		tweak(&cfg)
	}
	n, err := node.New(dbtest.Open(b.t, newPool(b.t, b.url), ""), cfg)
	if err != nil {
		b.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx) }()
	b.t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			b.t.Errorf("%s stopped with %v", name, err)
		}
	})
	return n
}

// job is one stored job as the database has it.
type job struct {
	State     string
	Attempts  int
	Kind      string
	LastError string
	Output    string
}

func (b *bundle) job(seq int64) job {
	b.t.Helper()
	var j job
	if err := b.pool.QueryRow(b.t.Context(), `SELECT state, attempts, COALESCE(kind, ''), COALESCE(last_error, ''), COALESCE(output::text, '')
		FROM batchclaim.batches WHERE seq = $1`, seq).Scan(&j.State, &j.Attempts, &j.Kind, &j.LastError, &j.Output); err != nil {
		b.t.Fatalf("job %d: %v", seq, err)
	}
	return j
}

// waitFinished waits until every job is finished (COMMITTED, INVALID, DISCARDED, CANCELLED).
func (b *bundle) waitFinished(within time.Duration) {
	b.t.Helper()
	testutil.WaitFor(b.t, within, "every job finished", func() bool {
		var open int
		err := b.pool.QueryRow(context.Background(), `SELECT count(*) FROM batchclaim.batches WHERE unfinished`).Scan(&open)
		return err == nil && open == 0
	})
}
