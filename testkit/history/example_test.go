package history_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/claims"
	"github.com/batchclaim/batchclaim/pgdb"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
	"github.com/batchclaim/batchclaim/testkit/history"
)

// CheckClaims reads the claim events every engine recorded and checks the claims' invariants:
// one owner at a time, epochs that only grow, a history that ends where the claims table is.
// Two claim engines hand the service_id order-42 over cleanly: a takes it, stops and releases
// it, and b takes it with a larger epoch. Then a broken engine is imitated by recording an
// acquisition of order-42 for a, with b's epoch, while b still owns it. The problems name
// instances by id and events by time; the example prints them with the ids replaced by the
// engines' names and the times left out.
func ExampleCheckClaims() {
	pool, drop := dbtest.ExamplePool()
	defer drop()
	db, err := pgdb.Open(pool, "")
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	if err := claims.RegisterServiceIDs(ctx, pool, "order-42"); err != nil {
		panic(err)
	}
	start := func(name string) *claims.Engine {
		e, err := claims.New(db, claims.Config{Name: name})
		if err != nil {
			panic(err)
		}
		if err := e.Register(ctx); err != nil {
			panic(err)
		}
		if _, err := e.Cycle(ctx); err != nil {
			panic(err)
		}
		return e
	}
	a := start("a")
	if err := a.Shutdown(ctx); err != nil {
		panic(err)
	}
	b := start("b")
	defer func() { _ = b.Shutdown(ctx) }()
	names := strings.NewReplacer(a.InstanceID().String(), "a", b.InstanceID().String(), "b")
	times := regexp.MustCompile(` at [A-Z][a-z]{2} [ 0-9]\d \d\d:\d\d:\d\d\.\d{6}`)
	show := func(when string) {
		r, err := history.CheckClaims(ctx, pool)
		if err != nil {
			panic(err)
		}
		fmt.Printf("%s: acquisitions %d, double owners %d, epoch regressions %d, gaps %d\n",
			when, r.Acquisitions, r.DoubleOwners, r.EpochRegressions, r.Gaps)
		for _, p := range r.Problems {
			fmt.Println("  " + times.ReplaceAllString(names.Replace(p), ""))
		}
	}
	show("clean")

	if _, err := pool.Exec(ctx, `INSERT INTO batchclaim.claim_events (service_id, instance_id, epoch, event)
		VALUES ('order-42', $1, 2, 'acquired')`, a.InstanceID()); err != nil {
		panic(err)
	}
	show("broken")
	// Output:
	// clean: acquisitions 2, double owners 0, epoch regressions 0, gaps 0
	// broken: acquisitions 3, double owners 1, epoch regressions 1, gaps 1
	//   order-42: a acquired epoch 2 while b still owned epoch 2 (two owners)
	//   order-42: epoch 2 acquired after epoch 2
	//   order-42: history says a@2, table says b@2
}

// CheckJobs checks a recorded history of jobs. After a run a harness reads it from the
// database with ReadJobs; here two histories of the same two jobs are built by hand. In the
// first, the second job of the service_id goes in flight (INFLIGHT, then PENDING at the
// ledger) only once the first has settled; in the second, it is marked while the first is
// still PENDING.
func ExampleCheckJobs() {
	t0 := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	job := func(seq int64, mark, settle int) history.Job {
		return history.Job{
			Seq: seq, Service: "order-42", BatchID: fmt.Sprintf("b%d", seq), Stored: at(0),
			Changes: []history.JobChange{
				{At: at(mark), From: batchclaim.StateNew, To: batchclaim.StateInflight, Src: "attempt"},
				{At: at(mark + 10), From: batchclaim.StateInflight, To: batchclaim.StatePending, Src: "outcome"},
				{At: at(settle), From: batchclaim.StatePending, To: batchclaim.StateCommitted, Src: "transition"},
			},
			Attempts: []int{1},
			Final:    batchclaim.StateCommitted,
			Queued:   true,
		}
	}
	promises := []history.Promise{{Kind: history.PromiseStored, Seq: 1}, {Kind: history.PromiseStored, Seq: 2}}
	show := func(when string, h history.JobHistory) {
		r := history.CheckJobs(h, promises)
		fmt.Printf("%s: %d jobs; in flight together %d, lost %d, terminal left %d, attempts repeated %d\n",
			when, r.Jobs, r.DoubleInFlight.Count, r.Lost.Count, r.TerminalRegressions.Count, r.RepeatedAttempts.Count)
		for _, f := range [][]string{r.DoubleInFlight.Problems, r.Lost.Problems, r.TerminalRegressions.Problems, r.RepeatedAttempts.Problems} {
			for _, p := range f {
				fmt.Println("  " + p)
			}
		}
	}
	show("serial", history.JobHistory{Jobs: []history.Job{job(1, 100, 200), job(2, 200, 300)}, End: at(1000)})
	show("overlapping", history.JobHistory{Jobs: []history.Job{job(1, 100, 200), job(2, 150, 300)}, End: at(1000)})
	// Output:
	// serial: 2 jobs; in flight together 0, lost 0, terminal left 0, attempts repeated 0
	// overlapping: 2 jobs; in flight together 1, lost 0, terminal left 0, attempts repeated 0
	//   order-42: seq 2 INFLIGHT from 12:00:00.150000 while seq 1 was PENDING (12:00:00.110000 to 12:00:00.200000): two jobs of the key in flight
}

// CheckOutstanding walks the ledger's own record of POSTs and settlements: a batch of a
// service_id may reach the ledger only while no other batch of it is outstanding there. A
// repeated POST of the same batch, or one the ledger refused, is not a second batch in
// flight.
func ExampleCheckOutstanding() {
	at := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	post := func(id, effect string) history.LedgerEvent {
		return history.LedgerEvent{Service: "order-42", BatchID: id, Effect: effect, At: at}
	}
	settle := func(id string) history.LedgerEvent {
		return history.LedgerEvent{Settle: true, Service: "order-42", BatchID: id, At: at}
	}
	r := history.CheckOutstanding([]history.LedgerEvent{
		post("b1", "dropped-response"), post("b1", "duplicate"), post("b2", "rejected"), settle("b1"),
		post("b2", "accepted"), post("b3", "accepted"), settle("b2"), settle("b3"),
	})
	fmt.Println("double outstanding:", r.DoubleOutstanding)
	for _, p := range r.Pairs {
		fmt.Printf("  %s: %s posted while %s was outstanding\n", p.Service, p.Posted, p.Outstanding)
	}
	// Output:
	// double outstanding: 1
	//   order-42: b3 posted while b2 was outstanding
}
