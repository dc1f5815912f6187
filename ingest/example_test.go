package ingest_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/batchclaim/batchclaim/ingest"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
)

// A job stored in the application's own transaction: it exists exactly when the
// application's write does. The instance holding the service_id is woken when the
// transaction commits; a rolled-back transaction leaves no job behind.
func ExampleEnqueue() {
	pool, drop := dbtest.ExamplePool()
	defer drop()
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `CREATE TABLE orders (id text PRIMARY KEY, total int)`); err != nil {
		panic(err)
	}
	place := func(id string, total int) error {
		return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `INSERT INTO orders VALUES ($1, $2)`, id, total); err != nil {
				return err
			}
			if _, err := ingest.Enqueue(ctx, tx, "customer-9", "confirm-"+id, []byte(id)); err != nil {
				return err
			}
			if total <= 0 {
				return errors.New("an order needs a positive total")
			}
			return nil
		})
	}
	fmt.Println(place("o-1", 30))
	fmt.Println(place("o-2", 0))
	var orders, jobs int
	_ = pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM orders), (SELECT count(*) FROM batchclaim.batches)`).Scan(&orders, &jobs)
	fmt.Println(orders, "order,", jobs, "job")

	// Storing the same job again changes nothing.
	st, err := ingest.Enqueue(ctx, pool, "customer-9", "confirm-o-1", []byte("o-1"))
	fmt.Println(st.New, err)
	// Output:
	// <nil>
	// an order needs a positive total
	// 1 order, 1 job
	// false <nil>
}

// Many jobs of several keys stored in one statement, in the application's transaction: each
// key's jobs keep the order of the list, and a job stored before is reported, not stored
// again.
func ExampleEnqueueMany() {
	pool, drop := dbtest.ExamplePool()
	defer drop()
	ctx := context.Background()
	if _, err := ingest.Enqueue(ctx, pool, "customer-1", "welcome", nil); err != nil {
		panic(err)
	}
	var stored []ingest.Stored
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) (err error) {
		stored, err = ingest.EnqueueMany(ctx, tx, []ingest.Job{
			{ServiceID: "customer-1", BatchID: "welcome", Payload: []byte("hi")},
			{ServiceID: "customer-1", BatchID: "invoice-7", Payload: []byte("7")},
			{ServiceID: "customer-2", BatchID: "welcome", Payload: []byte("hi")},
			{ServiceID: "customer-1", BatchID: "invoice-8", Payload: []byte("8")},
		})
		return err
	})
	fmt.Println(err)
	for _, s := range stored {
		fmt.Println(s.BatchID, s.New)
	}
	rows, _ := pool.Query(ctx, `SELECT service_id, batch_id FROM batchclaim.batches ORDER BY service_id, pos`)
	order, _ := pgx.CollectRows(rows, func(r pgx.CollectableRow) (string, error) {
		var svc, id string
		err := r.Scan(&svc, &id)
		return svc + "/" + id, err
	})
	fmt.Println(order)
	// Output:
	// <nil>
	// welcome false
	// invoice-7 true
	// welcome true
	// invoice-8 true
	// [customer-1/welcome customer-1/invoice-7 customer-1/invoice-8 customer-2/welcome]
}
