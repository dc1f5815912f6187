package lock_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batchclaim/batchclaim/patterns/lock"
	"github.com/batchclaim/batchclaim/pgdb"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
)

// childEnv, when set, makes the test binary a lock holder process for the fault tests
// instead of running tests: "URL|NAME|TTL".
const childEnv = "LOCK_TEST_CHILD"

func TestMain(m *testing.M) {
	if spec := os.Getenv(childEnv); spec != "" {
		os.Exit(holder(spec))
	}
	dbtest.Main(m)
}

// holder acquires the lock, prints "acquired EPOCH", keeps it alive, and when a renewal
// reports it lost prints "lost: ERR" and then what releasing with its old token did.
func holder(spec string) int {
	var url, name, ttl string
	if _, err := fmt.Sscanf(spec, "%s %s %s", &url, &name, &ttl); err != nil {
		fmt.Println("bad spec:", err)
		return 2
	}
	d, _ := time.ParseDuration(ttl)
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		fmt.Println(err)
		return 2
	}
	defer pool.Close()
	db, err := pgdb.Open(pool, "")
	if err != nil {
		fmt.Println(err)
		return 2
	}
	locks, err := lock.New(db, lock.Config{TTL: d})
	if err != nil {
		fmt.Println(err)
		return 2
	}
	lease, err := locks.Acquire(ctx, name)
	if err != nil {
		fmt.Println(err)
		return 2
	}
	fmt.Println("acquired " + strconv.FormatInt(lease.Epoch, 10))
	err = locks.KeepAlive(ctx, lease)
	fmt.Printf("lost: %v\n", err)
	if err := locks.Release(ctx, lease); errors.Is(err, lock.ErrNotHeld) {
		fmt.Println("release refused")
	}
	return 3
}
