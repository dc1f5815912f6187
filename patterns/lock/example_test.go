package lock_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/batchclaim/batchclaim/testkit/dbtest"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/patterns/lock"
)

// Two workers want the nightly report job; only the holder of the lock runs it, and only
// the holder's token can renew or release it. Each acquisition has a larger epoch, a fencing
// token for whatever the job writes.
func Example() {
	pool, drop := dbtest.ExamplePool()
	defer drop()
	ctx := context.Background()

	locks, err := lock.New(pool, lock.Config{TTL: 30 * time.Second})
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

// The TTL is validated when the Locker is made.
func ExampleNew() {
	_, err := lock.New(nil, lock.Config{TTL: time.Millisecond})
	fmt.Println(err)
	locks, _ := lock.New(nil, lock.Config{})
	fmt.Println(locks.TTL())
	// Output:
	// invalid lock config: ttl must be at least 10ms, got 1ms
	// 1m0s
}
