package node_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/claims"
	"github.com/batchclaim/batchclaim/node"
	"github.com/batchclaim/batchclaim/observer"
	"github.com/batchclaim/batchclaim/pgdb"
	"github.com/batchclaim/batchclaim/submitter"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
)

// Middleware runs around every job, with the job's key, the claim's epoch and the attempt in
// reach: here a log line after each attempt (a middleware), and a hook that sees the errors.
// The job fails once and is retried; its own timeout (node.Timeout) bounds each attempt.
func Example_middleware() {
	pool, drop := dbtest.ExamplePool()
	defer drop()
	ctx := context.Background()
	if _, err := node.Enqueue(ctx, pool, "account-9", "statement", nil, node.Timeout(5*time.Second)); err != nil {
		panic(err)
	}

	logAttempts := submitter.MiddlewareFunc(func(ctx context.Context, j submitter.Job, next func(context.Context) (batchclaim.Result, error)) (batchclaim.Result, error) {
		r, err := next(ctx)
		fmt.Printf("%s attempt %d (epoch > 0: %v): %s\n", j.Claim.ServiceID, j.Batch.Attempts+1, j.Claim.Epoch > 0, r.Verdict)
		return r, err
	})
	onError := submitter.Hooks{Error: func(ctx context.Context, j submitter.Job, err error) {
		fmt.Println("error:", err)
	}}
	done := make(chan struct{})
	db, err := pgdb.Open(pool, "") // the default schema
	if err != nil {
		panic(err)
	}
	n, err := node.New(db, node.Config{
		Claims:      claims.Config{RenewInterval: 100 * time.Millisecond, Expiry1: 5 * time.Second},
		BackoffBase: 10 * time.Millisecond,
		Middleware:  []submitter.Middleware{logAttempts, onError},
		Submitter: submitter.SubmitterFunc(func(ctx context.Context, b batchclaim.Batch) (batchclaim.Result, error) {
			if b.Attempts == 0 {
				return batchclaim.Result{}, errors.New("ledger busy")
			}
			return batchclaim.Result{Verdict: batchclaim.Done}, nil
		}),
		Events: observer.Events{StatusChanged: func(t observer.Transition) {
			if t.To.Terminal() {
				close(done)
			}
		}},
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
	// Output:
	// error: ledger busy
	// account-9 attempt 1 (epoch > 0: true): retry
	// account-9 attempt 2 (epoch > 0: true): done
	// stopped: <nil>
}
