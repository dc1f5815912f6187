package pgsource_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/batchclaim/batchclaim/testkit/pgsource"
)

// setenv sets an environment variable for one example and returns what puts it back.
func setenv(key, value string) (restore func()) {
	old, had := os.LookupEnv(key)
	if err := os.Setenv(key, value); err != nil {
		log.Fatal(err)
	}
	return func() {
		if had {
			_ = os.Setenv(key, old)
		} else {
			_ = os.Unsetenv(key)
		}
	}
}

// The demo finds its server with Acquire: a URL in DATABASE_URL comes first and is used as
// it is, unchecked; nothing is started, so Close has nothing to release.
func ExampleAcquire() {
	defer setenv("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable")()
	ctx := context.Background()

	src, err := pgsource.Acquire(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(src.Kind)
	fmt.Println(src.URL)
	fmt.Println("cluster:", src.Cluster != nil)
	fmt.Println("close:", src.Close(ctx))
	// Output:
	// env
	// postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable
	// cluster: false
	// close: <nil>
}

// Server is the same chain with the variable of one's choosing; the test harness (package
// dbtest) passes TEST_DATABASE_URL. The URL is not checked here: connecting reports what is
// wrong with it.
func ExampleServer() {
	defer setenv("ORDERS_TEST_DATABASE_URL", "postgres://ci@db.internal:5432/orders")()
	ctx := context.Background()

	src, err := pgsource.Server(ctx, nil, "ORDERS_TEST_DATABASE_URL")
	if err != nil {
		log.Fatal(err)
	}
	defer src.Close(ctx)
	fmt.Println(src.Kind == pgsource.KindEnv, src.URL)
	// Output:
	// true postgres://ci@db.internal:5432/orders
}

// WaitDatabase matters only for a multi-host URL (a primary and its standbys). A one-host URL
// returns at once, without connecting; hosts that cannot be reached at all are not waited
// for.
func ExampleWaitDatabase() {
	ctx := context.Background()
	fmt.Println(pgsource.WaitDatabase(ctx, "postgres://app@db.internal:5432/app"))
	fmt.Println(pgsource.WaitDatabase(ctx, "postgres://app@127.0.0.1:1,127.0.0.1:2/app?connect_timeout=1"))
	// Output:
	// <nil>
	// <nil>
}
