package node_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/claims"
	"github.com/batchclaim/batchclaim/internal/dbtest"
	"github.com/batchclaim/batchclaim/node"
	"github.com/batchclaim/batchclaim/submitter"
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
	n, err := node.New(pool, node.Config{
		Claims: claims.Config{RenewInterval: 100 * time.Millisecond, Expiry1: time.Second},
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
