package inspect_test

import (
	"context"
	"fmt"

	"github.com/batchclaim/batchclaim/ingest"
	"github.com/batchclaim/batchclaim/inspect"
	"github.com/batchclaim/batchclaim/pgdb"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
)

// Reading what `batchclaim status` shows: batches by state, the service_ids with unfinished
// batches, and one job.
func Example() {
	pool, done := dbtest.ExamplePool()
	defer done()
	ctx := context.Background()
	d, err := pgdb.Open(pool, "") // the default schema
	if err != nil {
		fmt.Println(err)
		return
	}
	var last ingest.Stored
	for _, id := range []string{"order-1", "order-2"} {
		if last, err = ingest.Enqueue(ctx, d, "shop-eu", id, []byte(`{"total":12}`), ingest.Kind("invoice")); err != nil {
			fmt.Println(err)
			return
		}
	}

	totals, err := inspect.Totals(ctx, d)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("batches: %v, finished %d of %d\n", totals, totals.Finished(), totals.Total())
	b, err := inspect.Batches(ctx, d, 10)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, s := range b.Services {
		fmt.Printf("unfinished: %s %v\n", s.ServiceID, s.ByState)
	}
	kinds, err := inspect.Kinds(ctx, d)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, k := range kinds {
		fmt.Printf("kind %s: %v\n", k.Kind, k.ByState)
	}
	j, err := inspect.Job(ctx, d, last.Seq)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("job %s: %s, %s, %d bytes\n", j.BatchID, j.Kind, j.State, j.PayloadBytes)
	// Output:
	// batches: map[NEW:2], finished 0 of 2
	// unfinished: shop-eu map[NEW:2]
	// kind invoice: map[NEW:2]
	// job order-2: invoice, NEW, 12 bytes
}
