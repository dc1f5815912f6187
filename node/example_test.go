package node_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/claims"
	"github.com/batchclaim/batchclaim/dlt"
	"github.com/batchclaim/batchclaim/dlt/dltsim"
	"github.com/batchclaim/batchclaim/ingest"
	"github.com/batchclaim/batchclaim/node"
	"github.com/batchclaim/batchclaim/observer"
	"github.com/batchclaim/batchclaim/pgdb"
	"github.com/batchclaim/batchclaim/submitter"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
)

// A per-key serial job runner: jobs of one key run one at a time, in the order they were
// stored, on whichever instance holds the key; jobs of different keys run side by side. The
// Submitter is the job; a Done result finishes it. Enqueue stores work, here outside any
// transaction; pass your own pgx.Tx to store it atomically with your other writes.
func Example_jobRunner() {
	pool, drop := dbtest.ExamplePool()
	defer drop()
	ctx := context.Background()

	for _, job := range []string{"reserve", "charge", "ship"} {
		if _, err := node.Enqueue(ctx, pool, "order-42", job, []byte(job)); err != nil {
			panic(err)
		}
	}

	var mu sync.Mutex
	var ran []string
	done := make(chan struct{})
	db, err := pgdb.Open(pool, "") // the default schema
	if err != nil {
		panic(err)
	}
	n, err := node.New(db, node.Config{
		Claims: claims.Config{RenewInterval: 100 * time.Millisecond, Expiry1: 5 * time.Second},
		Submitter: submitter.SubmitterFunc(func(ctx context.Context, b batchclaim.Batch) (batchclaim.Result, error) {
			mu.Lock()
			defer mu.Unlock()
			ran = append(ran, fmt.Sprintf("%s %s", b.ServiceID, b.Payload))
			if len(ran) == 3 {
				close(done)
			}
			return batchclaim.Result{Verdict: batchclaim.Done}, nil
		}),
	})
	if err != nil {
		panic(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	stopped := make(chan error)
	go func() { stopped <- n.Run(runCtx) }()
	<-done
	stop()
	fmt.Println("stopped:", <-stopped)
	for _, r := range ran {
		fmt.Println(r)
	}
	// Output:
	// stopped: <nil>
	// order-42 reserve
	// order-42 charge
	// order-42 ship
}

// Errors are retried: a job that returns an error is DELAYED for a backoff and runs again, up
// to its attempt limit (here its own, 2; Config.MaxAttempts else, 25 by default). Its last
// failed attempt makes it DISCARDED, and its key goes on with the next job. Once the cause is
// fixed, Retry runs it again (the status page and `batchclaim retry` do the same), with up to
// its attempt limit again; its attempts go on counting.
func Example_retries() {
	pool, drop := dbtest.ExamplePool()
	defer drop()
	ctx := context.Background()

	charge, err := node.Enqueue(ctx, pool, "order-7", "charge", nil, node.MaxAttempts(2))
	if err != nil {
		panic(err)
	}
	if _, err := node.Enqueue(ctx, pool, "order-7", "notify", nil); err != nil {
		panic(err)
	}

	var mu sync.Mutex
	cardValid := false
	finished := make(chan string, 10) // a job's id when it finished, printed by the event itself
	db, err := pgdb.Open(pool, "")    // the default schema
	if err != nil {
		panic(err)
	}
	n, err := node.New(db, node.Config{
		Claims:      claims.Config{RenewInterval: 100 * time.Millisecond, Expiry1: 5 * time.Second},
		BackoffBase: 10 * time.Millisecond,
		Submitter: submitter.SubmitterFunc(func(ctx context.Context, b batchclaim.Batch) (batchclaim.Result, error) {
			mu.Lock()
			defer mu.Unlock()
			fmt.Printf("%s, attempt %d\n", b.BatchID, b.Attempts+1)
			if b.BatchID == "charge" && !cardValid {
				return batchclaim.Result{}, errors.New("card declined")
			}
			return batchclaim.Result{Verdict: batchclaim.Done}, nil
		}),
		Events: observer.Events{StatusChanged: func(t observer.Transition) {
			if t.To.Terminal() {
				fmt.Println(t.BatchID, t.To)
				finished <- t.BatchID
			}
		}},
	})
	if err != nil {
		panic(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	stopped := make(chan error)
	go func() { stopped <- n.Run(runCtx) }()
	<-finished // charge
	<-finished // notify

	mu.Lock()
	cardValid = true
	mu.Unlock()
	if _, err := node.Retry(ctx, pool, charge.Seq); err != nil {
		panic(err)
	}
	<-finished // charge again
	stop()
	fmt.Println("stopped:", <-stopped)
	// Output:
	// charge, attempt 1
	// charge, attempt 2
	// charge DISCARDED
	// notify, attempt 1
	// notify COMMITTED
	// charge, attempt 3
	// charge COMMITTED
	// stopped: <nil>
}

// A ledger pipeline: batches of a Sawtooth BatchList go to the ledger (here its simulator)
// in order, and each is COMMITTED once the ledger says so. The dlt client is both the
// Submitter and the status source the node polls.
func Example_ledger() {
	pool, drop := dbtest.ExamplePool()
	defer drop()
	ctx := context.Background()
	sim, err := dltsim.New(dltsim.Config{Flavor: dlt.FlavorSawtooth})
	if err != nil {
		panic(err)
	}
	defer sim.Close()
	ledgerURL, err := sim.Listen()
	if err != nil {
		panic(err)
	}
	client, err := dlt.NewClient(dlt.Config{Flavor: dlt.FlavorSawtooth, URL: ledgerURL})
	if err != nil {
		panic(err)
	}

	names := map[string]string{}
	for i := range 3 {
		id, list := dlt.FakeBatch("device-1", i)
		names[id] = fmt.Sprint("batch ", i)
		if _, err := ingest.EnqueueBatchList(ctx, pool, "device-1", list); err != nil {
			panic(err)
		}
	}
	committed := make(chan string, 3)
	db, err := pgdb.Open(pool, "") // the default schema
	if err != nil {
		panic(err)
	}
	n, err := node.New(db, node.Config{
		Claims:    claims.Config{RenewInterval: 100 * time.Millisecond, Expiry1: 5 * time.Second},
		Submitter: client, Statuses: client,
		Events: observer.Events{StatusChanged: func(t observer.Transition) {
			if t.To == batchclaim.StateCommitted {
				committed <- names[t.BatchID]
			}
		}},
	})
	if err != nil {
		panic(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	stopped := make(chan error)
	go func() { stopped <- n.Run(runCtx) }()
	for range 3 {
		fmt.Println(<-committed, "COMMITTED")
	}
	stop()
	fmt.Println("stopped:", <-stopped)
	// Output:
	// batch 0 COMMITTED
	// batch 1 COMMITTED
	// batch 2 COMMITTED
	// stopped: <nil>
}

// Many jobs in one call: EnqueueMany stores them in one statement, each key's jobs in the
// order of the list, and the holders of their keys are woken once it commits. A node runs
// them as any others.
func ExampleEnqueueMany() {
	pool, drop := dbtest.ExamplePool()
	defer drop()
	ctx := context.Background()

	stored, err := node.EnqueueMany(ctx, pool, []node.Job{
		{ServiceID: "order-7", BatchID: "reserve", Payload: []byte("reserve")},
		{ServiceID: "order-8", BatchID: "reserve", Payload: []byte("reserve")},
		{ServiceID: "order-7", BatchID: "ship", Payload: []byte("ship")},
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(len(stored), "stored")

	var mu sync.Mutex
	ran := map[string][]string{}
	done := make(chan struct{})
	db, err := pgdb.Open(pool, "") // the default schema
	if err != nil {
		panic(err)
	}
	n, err := node.New(db, node.Config{
		Claims: claims.Config{RenewInterval: 100 * time.Millisecond, Expiry1: 5 * time.Second},
		Submitter: submitter.SubmitterFunc(func(ctx context.Context, b batchclaim.Batch) (batchclaim.Result, error) {
			mu.Lock()
			defer mu.Unlock()
			ran[b.ServiceID] = append(ran[b.ServiceID], string(b.Payload))
			if len(ran["order-7"])+len(ran["order-8"]) == 3 {
				close(done)
			}
			return batchclaim.Result{Verdict: batchclaim.Done}, nil
		}),
	})
	if err != nil {
		panic(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	stopped := make(chan error)
	go func() { stopped <- n.Run(runCtx) }()
	<-done
	stop()
	fmt.Println("stopped:", <-stopped)
	fmt.Println("order-7:", ran["order-7"])
	fmt.Println("order-8:", ran["order-8"])
	// Output:
	// 3 stored
	// stopped: <nil>
	// order-7: [reserve ship]
	// order-8: [reserve]
}
