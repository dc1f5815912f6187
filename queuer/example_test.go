package queuer_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/claims"
	"github.com/batchclaim/batchclaim/ingest"
	"github.com/batchclaim/batchclaim/observer"
	"github.com/batchclaim/batchclaim/pgdb"
	"github.com/batchclaim/batchclaim/queuer"
	"github.com/batchclaim/batchclaim/submitter"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
)

// shipper is a tiny Submitter: it notes which batch of each service_id it ran, in order, and
// finishes every one (Done).
type shipper struct {
	mu  sync.Mutex
	ran map[string][]string // service_id -> batch ids, in the order they ran
}

func (s *shipper) Submit(_ context.Context, b batchclaim.Batch) (batchclaim.Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ran[b.ServiceID] = append(s.ran[b.ServiceID], b.BatchID)
	return batchclaim.Result{Verdict: batchclaim.Done}, nil
}

// The parts of one instance wired by hand, as package node does (most programs use node): the
// claim engine holds the service_ids, the recorder writes every state change fenced on its
// claim, the submitter pool runs the batches, and the queuer hands each held service_id's
// next batch to the pool, one at a time per service_id and in the order they were stored.
// Each part is told about the others through hooks: a gained claim, a recorded status and an
// ended submission make the queuer look at that service_id again.
//
// Without node's LISTEN connection nothing tells the queuer about a batch stored later, so
// SweepAll makes it look at every held claim each Interval.
func ExampleQueuer() {
	pool, drop := dbtest.ExamplePool()
	defer drop()
	db, err := pgdb.Open(pool, "")
	if err != nil {
		panic(err)
	}
	ctx := context.Background()

	// Two orders, three jobs each, stored in one transaction: all or none of them.
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		for _, job := range []string{"reserve", "charge", "ship"} {
			for _, order := range []string{"order-2", "order-1"} {
				if _, err := ingest.Enqueue(ctx, tx, order, job, []byte(job)); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		panic(err)
	}

	var q *queuer.Queuer // set below; the hooks run only once the parts run
	eng, err := claims.New(db, claims.Config{
		RenewInterval: 100 * time.Millisecond, Expiry1: 5 * time.Second,
		OnGained: func(c claims.Claim) { q.Dirty(c.ServiceID) },
	})
	if err != nil {
		panic(err)
	}
	timings := eng.Timings()

	committed := make(chan string, 6)
	rec, err := observer.NewRecorder(db, eng, observer.RecorderConfig{
		FlushTimeout: timings.LocalDeadline,
		Events: &observer.Events{StatusChanged: func(tr observer.Transition) {
			if tr.To == batchclaim.StateCommitted {
				committed <- tr.ServiceID
			}
		}},
		Recorded: func(serviceID string) { q.Dirty(serviceID) },
		// An outcome that left its service_id without work: Done need not look at it again.
		Drained: func(serviceID string, seq int64) { q.Drained(serviceID, seq) },
	})
	if err != nil {
		panic(err)
	}

	sub := &shipper{ran: map[string][]string{}}
	workers, err := submitter.New(sub, rec, func(j submitter.Job) { q.Done(j) }, submitter.Config{
		Workers: 4, Timeout: timings.MaxSubmission, RetryErrors: true, Lease: eng,
		MayChain: func(j submitter.Job, run int) bool { return q.MayChain(j, run) },
		Chained:  func(prev, next submitter.Job) { q.Chained(prev, next) },
	})
	if err != nil {
		panic(err)
	}
	q, err = queuer.New(db, eng, workers, rec, queuer.Config{
		Interval: timings.RenewInterval, StatementTimeout: timings.LocalDeadline, SweepAll: true,
	})
	if err != nil {
		panic(err)
	}

	if err := eng.Register(ctx); err != nil {
		panic(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	var running sync.WaitGroup
	running.Add(2)
	go func() { defer running.Done(); _ = eng.Run(runCtx) }() // claim cycles; the lease lasts until Shutdown
	go func() { defer running.Done(); _ = q.Run(runCtx) }()
	for range 6 {
		<-committed
	}

	// Stop: no new work; the running submissions get up to S to end, then are cancelled; the
	// claims are released, except those of submissions still running, left to expire.
	stop()
	running.Wait()
	wctx, cancel := context.WithTimeout(ctx, timings.MaxSubmission)
	if workers.Wait(wctx) != nil {
		workers.Cancel()
	}
	cancel()
	fmt.Println("stopped:", eng.ShutdownKeeping(ctx, workers.Running()))

	orders := make([]string, 0, len(sub.ran))
	for order := range sub.ran {
		orders = append(orders, order)
	}
	sort.Strings(orders)
	for _, order := range orders {
		fmt.Println(order+":", strings.Join(sub.ran[order], " -> "))
	}
	// Output:
	// stopped: <nil>
	// order-1: reserve -> charge -> ship
	// order-2: reserve -> charge -> ship
}
