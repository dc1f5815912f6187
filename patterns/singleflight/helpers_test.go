package singleflight

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batchclaim/batchclaim/pgdb"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
	"github.com/batchclaim/batchclaim/testkit/testutil"
)

func TestMain(m *testing.M) {
	if url := os.Getenv(helperEnv); url != "" {
		os.Exit(fetcherMain(url))
	}
	dbtest.Main(m)
}

// fakeSource is a Source whose calls the test controls: each call records itself, and when
// gate is set it blocks until the gate is closed. It fails the test if two calls of one key
// ever run at the same time in this process.
type fakeSource struct {
	t        testing.TB
	calls    atomic.Int64
	gate     chan struct{} // nil: answer at once
	err      error         // returned instead of a value when set
	mu       sync.Mutex
	running  map[string]int
	epochs   []int64
	FetchFun func(ctx context.Context, req Request) ([]byte, error) // overrides everything when set
}

func newFakeSource(t testing.TB, gated bool) *fakeSource {
	s := &fakeSource{t: t, running: map[string]int{}}
	if gated {
		s.gate = make(chan struct{})
	}
	return s
}

func (s *fakeSource) Fetch(ctx context.Context, req Request) ([]byte, error) {
	s.calls.Add(1)
	s.mu.Lock()
	s.running[req.Key]++
	if s.running[req.Key] > 1 {
		s.t.Errorf("two fetches of %q at once (epoch %d)", req.Key, req.Epoch)
	}
	s.epochs = append(s.epochs, req.Epoch)
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.running[req.Key]--
		s.mu.Unlock()
	}()
	if s.FetchFun != nil {
		return s.FetchFun(ctx, req)
	}
	if s.gate != nil {
		select {
		case <-s.gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if s.err != nil {
		return nil, s.err
	}
	return fmt.Appendf(nil, "%s@%d", req.Key, req.Epoch), nil
}

// open returns a pool on url closed when the test ends.
func open(t testing.TB, url string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 3 // many tests run at once on a shared server
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// openDB returns the DB of a pool of its own on url (open) in schema ("": the default).
func openDB(t testing.TB, url, schema string) pgdb.DB {
	t.Helper()
	return dbtest.Open(t, open(t, url), schema)
}

// newCache makes a cache on its own pool in the default schema; run starts its listener
// until the test ends.
func newCache(t testing.TB, url string, src Source, cfg Config, run bool) *Cache {
	t.Helper()
	return newCacheIn(t, openDB(t, url, ""), src, cfg, run)
}

// newCacheIn is newCache on db.
func newCacheIn(t testing.TB, db pgdb.DB, src Source, cfg Config, run bool) *Cache {
	t.Helper()
	c, err := New(db, src, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if run {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- c.Run(ctx) }()
		t.Cleanup(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		})
		testutil.WaitFor(t, 30*time.Second, "listener up", c.Listening)
	}
	return c
}

type result struct {
	e   Entry
	err error
}

// getAsync runs Get in a goroutine and returns its result channel.
func getAsync(ctx context.Context, c *Cache, key string, opts ...GetOption) <-chan result {
	ch := make(chan result, 1)
	go func() {
		e, err := c.Get(ctx, key, opts...)
		ch <- result{e, err}
	}()
	return ch
}

func recv(t testing.TB, ch <-chan result) result {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(30 * time.Second):
		t.Fatal("Get did not return within 30s")
		return result{}
	}
}
