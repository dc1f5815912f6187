package lock_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/batchclaim/batchclaim/testkit/dbtest"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/patterns/lock"
	"github.com/batchclaim/batchclaim/pgdb"
)

// Two workers want the nightly report job; only the holder of the lock runs it, and only
// the holder's token can renew or release it. Each acquisition has a larger epoch, a fencing
// token for whatever the job writes.
func Example() {
	pool, drop := dbtest.ExamplePool()
	defer drop()
	ctx := context.Background()
	db, err := pgdb.Open(pool, "")
	if err != nil {
		panic(err)
	}

	locks, err := lock.New(db, lock.Config{TTL: 30 * time.Second})
	if err != nil {
		panic(err)
	}
	a, err := locks.Acquire(ctx, "nightly-report")
	fmt.Println("worker a: epoch", a.Epoch, err)

	_, err = locks.Acquire(ctx, "nightly-report")
	fmt.Println("worker b:", err)

	forged := a
	forged.Token = "guessed"
	err = locks.Release(ctx, forged)
	fmt.Println("release with a wrong token:", errors.Is(err, lock.ErrNotHeld), errors.Is(err, batchclaim.ErrClaimLost))

	fmt.Println("renew by a:", locks.Renew(ctx, &a))
	fmt.Println("release by a:", locks.Release(ctx, a))

	b, err := locks.Acquire(ctx, "nightly-report")
	fmt.Println("worker b: epoch", b.Epoch, err)
	// Output:
	// worker a: epoch 1 <nil>
	// worker b: acquire lock nightly-report: lock held by another owner
	// release with a wrong token: true true
	// renew by a: <nil>
	// release by a: <nil>
	// worker b: epoch 2 <nil>
}

// The TTL is validated when the Locker is made, and so is the database.
func ExampleNew() {
	pool, drop := dbtest.ExamplePool()
	defer drop()
	db, err := pgdb.Open(pool, "")
	if err != nil {
		panic(err)
	}
	_, err = lock.New(db, lock.Config{TTL: time.Millisecond})
	fmt.Println(err)
	_, err = lock.New(pgdb.DB{}, lock.Config{})
	fmt.Println(err)
	locks, _ := lock.New(db, lock.Config{})
	fmt.Println(locks.TTL())
	// Output:
	// invalid lock config: ttl must be at least 10ms, got 1ms
	// lock: no database: make one with pgdb.Open(pool, schema)
	// 1m0s
}
