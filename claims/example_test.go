package claims_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/claims"
	"github.com/batchclaim/batchclaim/pgdb"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
)

// Knobs left unset follow from the ones set; Resolve shows the Config an Engine would use
// and checks every rule.
func ExampleConfig_Resolve() {
	c, err := claims.Config{
		RenewInterval: 500 * time.Millisecond,
		Expiry1:       3 * time.Second,
		Expiry2:       15 * time.Second,
	}.Resolve()
	fmt.Println(err)
	fmt.Println("local deadline:", c.Timings().LocalDeadline)
	fmt.Println("max submission:", c.Timings().MaxSubmission)

	_, err = claims.Config{RenewInterval: 2 * time.Second, Expiry1: 3 * time.Second}.Resolve()
	fmt.Println(err)
	// Output:
	// <nil>
	// local deadline: 2s
	// max submission: 12.7s
	// invalid claim timings: renew interval R <= T1/3 violated: R = 2s, T1 = 3s (T1/3 = 1s)
	// local deadline D >= 2R violated: D = 2s, R = 2s (2R = 4s). Not set, so from the defaults: D = 2/3 of T1 = 2s. You set Expiry1 = 3s, RenewInterval = 2s: change them, or also set LocalDeadline
}

// An engine registers, takes its share of the service_ids, and writes what it does about one
// of them fenced on its claim: the write commits only while the claim is held with its epoch.
// Once another instance has taken the service_id over (here: the first one's lease is seen as
// expired), the first one's fenced write is refused and nothing of it is stored.
func Example_fencedWrites() {
	pool, drop := dbtest.ExamplePool()
	defer drop()
	db, err := pgdb.Open(pool, "")
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `CREATE TABLE shipments (service_id text, epoch bigint)`); err != nil {
		panic(err)
	}
	if err := claims.RegisterServiceIDs(ctx, pool, "order-42"); err != nil {
		panic(err)
	}
	newEngine := func(name string) *claims.Engine {
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
	ship := func(e *claims.Engine, c claims.Claim) error {
		return e.WriteFenced(ctx, c, func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, `INSERT INTO shipments VALUES ($1, $2)`, c.ServiceID, c.Epoch)
			return err
		})
	}

	a := newEngine("a")
	c, held := a.Holds("order-42")
	fmt.Println("a holds order-42:", held)
	fmt.Println("a ships:", ship(a, c))

	b, err := claims.New(db, claims.Config{Name: "b"})
	if err != nil {
		panic(err)
	}
	b.ShiftDBTime(10 * time.Minute) // b sees a's lease long expired
	if err := b.Register(ctx); err != nil {
		panic(err)
	}
	if _, err := b.Cycle(ctx); err != nil {
		panic(err)
	}
	_, held = b.Holds("order-42")
	fmt.Println("b holds order-42:", held)
	err = ship(a, c) // a, paused meanwhile, does not know yet
	fmt.Println("a ships again, lost:", errors.Is(err, batchclaim.ErrClaimLost))

	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM shipments`).Scan(&n); err != nil {
		panic(err)
	}
	fmt.Println("shipments stored:", n)
	fmt.Println("b stops:", b.Shutdown(ctx))
	// Output:
	// a holds order-42: true
	// a ships: <nil>
	// b holds order-42: true
	// a ships again, lost: true
	// shipments stored: 1
	// b stops: <nil>
}
