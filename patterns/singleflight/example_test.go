package singleflight_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batchclaim/batchclaim/patterns/singleflight"
	"github.com/batchclaim/batchclaim/pgdb"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
)

// New checks the timings and does no I/O (the pool connects on first use).
func ExampleNew() {
	pool, err := pgxpool.New(context.Background(), "postgres://app@db.internal:5432/app")
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	db, err := pgdb.Open(pool, "") // batchclaim's tables in the default schema
	if err != nil {
		log.Fatal(err)
	}
	source := singleflight.SourceFunc(func(ctx context.Context, req singleflight.Request) ([]byte, error) {
		return []byte("rates for " + req.Key), nil
	})

	_, err = singleflight.New(db, source, singleflight.Config{LeaseTTL: 3 * time.Second, RenewInterval: 2 * time.Second})
	fmt.Println(err)

	cache, err := singleflight.New(db, source, singleflight.Config{Holder: "api-1", LeaseTTL: 3 * time.Second})
	fmt.Println(cache.Holder(), err)
	// Output:
	// invalid singleflight config: RenewInterval must be at most LeaseTTL/3: RenewInterval = 2s, LeaseTTL = 3s
	// api-1 <nil>
}

// How a service embeds the cache: Run keeps the LISTEN connection that wakes waiters, and
// every instance calls Get for the keys it needs. Here two caches (two instances) share one
// database; the slow source is called once.
func ExampleCache_Get() {
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	pool, drop := dbtest.ExamplePool() // your service's *pgxpool.Pool
	defer drop()
	db, err := pgdb.Open(pool, "")
	if err != nil {
		log.Fatal(err)
	}
	var calls atomic.Int32
	source := singleflight.SourceFunc(func(ctx context.Context, req singleflight.Request) ([]byte, error) {
		calls.Add(1)
		return fetchRatesFromUpstream(ctx, req.Key) // seconds; called by one instance per key at a time
	})
	var caches []*singleflight.Cache
	for _, holder := range []string{"api-1", "api-2"} {
		cache, err := singleflight.New(db, source, singleflight.Config{Holder: holder, TTL: 10 * time.Minute})
		if err != nil {
			log.Fatal(err)
		}
		go func() { _ = cache.Run(ctx) }()
		caches = append(caches, cache)
	}

	gctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for _, cache := range caches {
		e, err := cache.Get(gctx, "EUR", singleflight.AllowStale())
		var srcErr *singleflight.SourceError
		switch {
		case errors.As(err, &srcErr):
			log.Printf("upstream failed for %s: %s", srcErr.Key, srcErr.Message)
		case err != nil:
			log.Print(err)
		default:
			fmt.Printf("%s from %s: %s (stale %v)\n", e.Key, cache.Holder(), e.Value, e.Stale)
		}
	}
	fmt.Println("source calls:", calls.Load())
	// Output:
	// EUR from api-1: 1.08 (stale false)
	// EUR from api-2: 1.08 (stale false)
	// source calls: 1
}

func fetchRatesFromUpstream(context.Context, string) ([]byte, error) { return []byte("1.08"), nil }
