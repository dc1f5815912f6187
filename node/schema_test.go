package node_test

import (
	"cmp"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/migrations"
	"github.com/batchclaim/batchclaim/node"
	"github.com/batchclaim/batchclaim/pgdb"
	"github.com/batchclaim/batchclaim/submitter"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
	"github.com/batchclaim/batchclaim/testkit/testutil"
)

// A job runner in a database an application shares: the application has its own
// public.batches and golang-migrate's public.schema_migrations, and enqueues in its own
// transactions, whose search_path is its own. batchclaim keeps to its schema (the default, or
// another one given to migrations and node alike); two schemas in one database are two
// independent job runners; the application's tables are untouched.
func TestJobRunnerBesideAnApplication(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url := dbtest.NewDB(t)
	app := newPool(t, url)
	if _, err := app.Exec(ctx, `DROP SCHEMA batchclaim CASCADE;
		CREATE TABLE public.batches (id int PRIMARY KEY, note text);
		CREATE TABLE public.schema_migrations (version bigint NOT NULL PRIMARY KEY, dirty boolean NOT NULL);
		INSERT INTO public.schema_migrations VALUES (4, false)`); err != nil {
		t.Fatal(err)
	}
	for _, schema := range []string{"", "jobs"} {
		if err := migrations.Up(ctx, url, migrations.InSchema(cmp.Or(schema, migrations.SchemaDefault))); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	ran := map[string][]string{} // schema -> "key/job" in the order run
	runner := func(schema string) submitter.Submitter {
		return submitter.SubmitterFunc(func(_ context.Context, b batchclaim.Batch) (batchclaim.Result, error) {
			mu.Lock()
			defer mu.Unlock()
			ran[schema] = append(ran[schema], b.ServiceID+"/"+b.BatchID)
			return batchclaim.Result{Verdict: batchclaim.Done}, nil
		})
	}
	var nodes []*node.Node
	dbs := map[string]pgdb.DB{}
	for _, schema := range []string{"", "jobs"} {
		dbs[schema] = dbtest.Open(t, newPool(t, url), schema)
		n, err := node.New(dbs[schema], node.Config{Claims: sturdyClaims("n" + schema), Submitter: runner(schema)})
		if err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, n)
		runCtx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- n.Run(runCtx) }()
		t.Cleanup(func() { cancel(); <-done })
	}
	// The application's transactions: its own row and a job, atomically.
	for i := range 3 {
		for _, schema := range []string{"", "jobs"} {
			err := pgx.BeginFunc(ctx, app, func(tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, `INSERT INTO batches (id, note) VALUES ($1, $2)`, 10*i+len(schema), "order "+schema); err != nil {
					return err
				}
				_, err := node.Enqueue(ctx, dbs[schema].In(tx), "key", fmt.Sprintf("job-%d", i), nil)
				return err
			})
			if err != nil {
				t.Fatalf("enqueue in the application's transaction (schema %q): %v", schema, err)
			}
		}
	}
	testutil.WaitFor(t, 30*time.Second, "every job of both schemas committed", func() bool {
		var open int
		err := app.QueryRow(ctx, `SELECT (SELECT count(*) FROM batchclaim.batches WHERE state <> 'COMMITTED')
			+ (SELECT count(*) FROM jobs.batches WHERE state <> 'COMMITTED')`).Scan(&open)
		return err == nil && open == 0
	})
	// The lease is renewed on a connection of its own, in the node's schema: still renewed
	// after more than the first expiry.
	time.Sleep(2 * sturdyClaims("").Expiry1)
	for i, n := range nodes {
		if !n.Engine().Healthy() {
			t.Errorf("node %d stopped renewing its lease", i)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, schema := range []string{"", "jobs"} {
		if got := fmt.Sprint(ran[schema]); got != "[key/job-0 key/job-1 key/job-2]" {
			t.Errorf("schema %q ran %s, want its three jobs once each, in order", schema, got)
		}
	}
	var appRows, version int
	if err := app.QueryRow(ctx, `SELECT (SELECT count(*) FROM public.batches), (SELECT version FROM public.schema_migrations)`).Scan(&appRows, &version); err != nil || appRows != 6 || version != 4 {
		t.Fatalf("the application's tables: %d rows in batches, schema_migrations at %d (%v); want 6 and 4", appRows, version, err)
	}
}
