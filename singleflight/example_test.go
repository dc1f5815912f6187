package singleflight_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batchclaim/batchclaim/singleflight"
)

// New checks the timings and does no I/O (the pool connects on first use).
func ExampleNew() {
	pool, err := pgxpool.New(context.Background(), "postgres://app@db.internal:5432/app")
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	source := singleflight.SourceFunc(func(ctx context.Context, req singleflight.Request) ([]byte, error) {
		return []byte("rates for " + req.Key), nil
	})

	_, err = singleflight.New(pool, source, singleflight.Config{LeaseTTL: 3 * time.Second, RenewInterval: 2 * time.Second})
	fmt.Println(err)

	cache, err := singleflight.New(pool, source, singleflight.Config{Holder: "api-1", LeaseTTL: 3 * time.Second})
	fmt.Println(cache.Holder(), err)
	// Output:
	// invalid singleflight config: RenewInterval must be at most LeaseTTL/3: RenewInterval = 2s, LeaseTTL = 3s
	// api-1 <nil>
}

// How a service embeds the cache: Run keeps the LISTEN connection that wakes waiters, and
// every instance calls Get for the keys it needs.
func ExampleCache_Get() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://app@db.internal:5432/app")
	if err != nil {
		log.Fatal(err)
	}
	source := singleflight.SourceFunc(func(ctx context.Context, req singleflight.Request) ([]byte, error) {
		return fetchRatesFromUpstream(ctx, req.Key) // seconds; called by one instance per key at a time
	})
	cache, err := singleflight.New(pool, source, singleflight.Config{TTL: 10 * time.Minute})
	if err != nil {
		log.Fatal(err)
	}
	go func() { _ = cache.Run(ctx) }()

	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	e, err := cache.Get(ctx, "EUR", singleflight.AllowStale())
	var srcErr *singleflight.SourceError
	switch {
	case errors.As(err, &srcErr):
		log.Printf("upstream failed for %s: %s", srcErr.Key, srcErr.Message)
	case err != nil:
		log.Print(err)
	default:
		fmt.Printf("%s (epoch %d, stale %v, fresh until %s)\n", e.Value, e.Epoch, e.Stale, e.ExpiresAt)
	}
}

func fetchRatesFromUpstream(context.Context, string) ([]byte, error) { return []byte("1.08"), nil }
