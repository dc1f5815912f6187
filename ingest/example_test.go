package ingest_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/batchclaim/batchclaim/ingest"
	"github.com/batchclaim/batchclaim/internal/dbtest"
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
