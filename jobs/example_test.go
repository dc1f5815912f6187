package jobs_test

import (
	"context"
	"fmt"
	"time"

	"github.com/batchclaim/batchclaim/claims"
	"github.com/batchclaim/batchclaim/jobs"
	"github.com/batchclaim/batchclaim/node"
	"github.com/batchclaim/batchclaim/observer"
	"github.com/batchclaim/batchclaim/pgdb"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
)

type Welcome struct {
	User string `json:"user"`
}

func (Welcome) Kind() string { return "welcome" }

type Invoice struct {
	Cents int `json:"cents"`
}

func (Invoice) Kind() string { return "invoice" }

// Two kinds on one node: each job goes to the worker of its kind, the jobs of one key (here
// a customer) one at a time in the order they were inserted. The second job is inserted in
// the application's transaction, and records an output stored with it.
func Example() {
	pool, drop := dbtest.ExamplePool()
	defer drop()
	ctx := context.Background()

	workers := jobs.NewWorkers()
	jobs.AddWorker(workers, jobs.WorkFunc(func(ctx context.Context, j *jobs.Job[Welcome]) error {
		fmt.Printf("%s: welcome %s\n", j.ServiceID, j.Args.User)
		return nil
	}))
	jobs.AddWorker(workers, jobs.WorkFunc(func(ctx context.Context, j *jobs.Job[Invoice]) error {
		fmt.Printf("%s: invoice of %d cents, attempt %d\n", j.ServiceID, j.Args.Cents, j.Attempt())
		return jobs.RecordOutput(ctx, map[string]string{"invoice": "INV-1"})
	}))

	if _, err := jobs.Insert(ctx, pool, "customer-1", "welcome", Welcome{User: "ann"}); err != nil {
		panic(err)
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		panic(err)
	}
	// ... the application's own writes in tx ...
	invoice, err := jobs.Insert(ctx, tx, "customer-1", "invoice-1", Invoice{Cents: 1250}, jobs.Timeout(10*time.Second))
	if err != nil {
		panic(err)
	}
	if err := tx.Commit(ctx); err != nil {
		panic(err)
	}

	finished := make(chan struct{}, 2)
	db, err := pgdb.Open(pool, "") // the default schema
	if err != nil {
		panic(err)
	}
	n, err := node.New(db, node.Config{
		Claims:    claims.Config{RenewInterval: 100 * time.Millisecond, Expiry1: 5 * time.Second},
		Submitter: workers,
		Events: observer.Events{StatusChanged: func(t observer.Transition) {
			if t.To.Terminal() {
				finished <- struct{}{}
			}
		}},
	})
	if err != nil {
		panic(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	stopped := make(chan error)
	go func() { stopped <- n.Run(runCtx) }()
	<-finished
	<-finished
	stop()
	fmt.Println("stopped:", <-stopped)

	var kind, state, output string
	if err := pool.QueryRow(ctx, `SELECT kind, state, output::text FROM batchclaim.batches WHERE seq = $1`, invoice.Seq).Scan(&kind, &state, &output); err != nil {
		panic(err)
	}
	fmt.Println(kind, state, output)
	// Output:
	// customer-1: welcome ann
	// customer-1: invoice of 1250 cents, attempt 1
	// stopped: <nil>
	// invoice COMMITTED {"invoice": "INV-1"}
}

// Many jobs of several keys in one statement, as River's InsertMany: a job with an id is
// stored once (its repeat reported, not stored again); a job without an id is stored every
// time and known by its seq.
func ExampleInsertMany() {
	pool, drop := dbtest.ExamplePool()
	defer drop()
	ctx := context.Background()

	stored, err := jobs.InsertMany(ctx, pool, []jobs.InsertManyParams{
		{Key: "customer-1", ID: "welcome", Args: Welcome{User: "ann"}},
		{Key: "customer-2", Args: Invoice{Cents: 300}},
		{Key: "customer-1", Args: Invoice{Cents: 1250}, Options: []jobs.InsertOption{jobs.MaxAttempts(3)}},
		{Key: "customer-1", ID: "welcome", Args: Welcome{User: "ann"}}, // a repeat
	})
	if err != nil {
		panic(err)
	}
	for i, s := range stored {
		fmt.Printf("job %d: id %q, new %v, same seq as job 0: %v\n", i, s.BatchID, s.New, s.Seq == stored[0].Seq)
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM batchclaim.batches WHERE kind IN ('welcome', 'invoice')`).Scan(&n); err != nil {
		panic(err)
	}
	fmt.Println("stored:", n)
	// Output:
	// job 0: id "welcome", new true, same seq as job 0: true
	// job 1: id "", new true, same seq as job 0: false
	// job 2: id "", new true, same seq as job 0: false
	// job 3: id "welcome", new false, same seq as job 0: true
	// stored: 3
}
