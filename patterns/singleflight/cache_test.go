package singleflight

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batchclaim/batchclaim/internal/db"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
	"github.com/batchclaim/batchclaim/testkit/testutil"
)

// N concurrent Gets of one key across three caches (three pools) make exactly one source
// call, and everybody gets that call's value.
func TestOneFetchForConcurrentGets(t *testing.T) {
	t.Parallel()
	url := dbtest.NewDB(t)
	src := newFakeSource(t, true)
	var caches []*Cache
	for range 3 {
		caches = append(caches, newCache(t, url, src, Config{}, true))
	}
	const perCache = 10
	var chans []<-chan result
	for _, c := range caches {
		for range perCache {
			chans = append(chans, getAsync(t.Context(), c, "k"))
		}
	}
	// Release the source only once the caches that are not fetching have callers waiting.
	testutil.WaitFor(t, 30*time.Second, "waiters in the two other caches", func() bool {
		waiting := 0
		for _, c := range caches {
			if c.Stats().Fetches == 0 && c.Stats().Waits > 0 {
				waiting++
			}
		}
		return waiting == 2
	})
	close(src.gate)
	var epoch int64
	for _, ch := range chans {
		r := recv(t, ch)
		if r.err != nil {
			t.Fatal(r.err)
		}
		if epoch == 0 {
			epoch = r.e.Epoch
		}
		if r.e.Epoch != epoch || string(r.e.Value) != fmt.Sprintf("k@%d", epoch) || r.e.Stale {
			t.Fatalf("got %+v, want k@%d fresh", r.e, epoch)
		}
	}
	if n := src.calls.Load(); n != 1 {
		t.Fatalf("%d source calls for %d concurrent Gets, want 1", n, 3*perCache)
	}
}

// A fresh entry is served from the store by any instance without calling the source.
func TestFreshHitNeedsNoFetch(t *testing.T) {
	t.Parallel()
	url := dbtest.NewDB(t)
	src := newFakeSource(t, false)
	a := newCache(t, url, src, Config{}, false)
	b := newCache(t, url, src, Config{}, false)
	first, err := a.Get(t.Context(), "k")
	if err != nil {
		t.Fatal(err)
	}
	second, err := b.Get(t.Context(), "k")
	if err != nil {
		t.Fatal(err)
	}
	if src.calls.Load() != 1 || b.Stats().Hits != 1 || b.Stats().Fetches != 0 {
		t.Fatalf("calls %d, b's stats %+v: want 1 call and a hit in b", src.calls.Load(), b.Stats())
	}
	if second.Epoch != first.Epoch || string(second.Value) != string(first.Value) {
		t.Fatalf("b got %+v, a got %+v", second, first)
	}
	if !second.ExpiresAt.After(second.FetchedAt) {
		t.Fatalf("entry %+v: expiry not after fetch", second)
	}
}

// With AllowStale a stale value comes back at once while one instance refreshes it; a plain
// Get waits for the refresh, and a second stale reader does not start another one.
func TestAllowStaleReturnsAtOnce(t *testing.T) {
	t.Parallel()
	url := dbtest.NewDB(t)
	src := newFakeSource(t, false)
	a := newCache(t, url, src, Config{}, true)
	b := newCache(t, url, src, Config{}, true)
	old, err := a.Get(t.Context(), "k")
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Invalidate(t.Context(), "k"); err != nil {
		t.Fatal(err)
	}
	src.gate = make(chan struct{}) // the refresh blocks until released
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	stale, err := a.Get(ctx, "k", AllowStale())
	if err != nil {
		t.Fatal(err)
	}
	if !stale.Stale || stale.Epoch != old.Epoch {
		t.Fatalf("got %+v, want the old value (epoch %d) marked stale", stale, old.Epoch)
	}
	testutil.WaitFor(t, 30*time.Second, "the refresh to call the source", func() bool { return src.calls.Load() == 2 })
	for _, c := range []*Cache{a, b} { // a runs the refresh itself, b sees it in the database
		again, err := c.Get(ctx, "k", AllowStale())
		if err != nil || !again.Stale || again.Epoch != old.Epoch {
			t.Fatalf("stale reader while the refresh runs: %+v, %v", again, err)
		}
	}
	fresh := getAsync(t.Context(), b, "k")
	testutil.WaitFor(t, 30*time.Second, "the plain Get to wait", func() bool { return b.Stats().Waits > 0 })
	close(src.gate)
	r := recv(t, fresh)
	if r.err != nil || r.e.Stale || r.e.Epoch <= old.Epoch {
		t.Fatalf("plain Get after refresh: %+v, %v", r.e, r.err)
	}
	if n := src.calls.Load(); n != 2 {
		t.Fatalf("%d source calls, want 2 (first fetch and one refresh)", n)
	}
}

// A fetcher that took the lease and then vanished (no renewals) is replaced by a waiter once
// the lease expires by the database clock; the vanished fetcher's late result, of an older
// epoch, is dropped, whether the new fetch is still running or has stored its value.
func TestLeaseExpiryTakeoverAndOldEpochRejected(t *testing.T) {
	t.Parallel()
	url := dbtest.NewDB(t)
	lease := 800 * time.Millisecond
	ghost := newCache(t, url, newFakeSource(t, false), Config{Holder: "ghost", LeaseTTL: lease}, false)
	ghostRow, err := ghost.q.SingleflightAcquire(t.Context(), ghost.db, db.SingleflightAcquireParams{
		Key: "k", Holder: "ghost", LeaseUs: lease.Microseconds(), TtlUs: time.Minute.Microseconds()})
	if err != nil {
		t.Fatal(err)
	}

	src := newFakeSource(t, true)
	b := newCache(t, url, src, Config{LeaseTTL: lease}, true)
	got := getAsync(t.Context(), b, "k")
	testutil.WaitFor(t, 30*time.Second, "b to take the lease over", func() bool { return src.calls.Load() == 1 })
	if st := b.Stats(); st.Takeovers != 1 {
		t.Fatalf("b's stats %+v: want one takeover", st)
	}

	late := &flight{key: "k", epoch: ghostRow.FetchEpoch, done: make(chan struct{})}
	ghost.store(t.Context(), late, []byte("late, while the new fetch runs"))
	if !errors.Is(late.err, errLeaseLost) || ghost.Stats().Rejected != 1 {
		t.Fatalf("late store while the new fetch runs: err %v, stats %+v", late.err, ghost.Stats())
	}

	close(src.gate)
	r := recv(t, got)
	if r.err != nil || r.e.Epoch <= ghostRow.FetchEpoch {
		t.Fatalf("b got %+v, %v; want a value of an epoch after %d", r.e, r.err, ghostRow.FetchEpoch)
	}
	late = &flight{key: "k", epoch: ghostRow.FetchEpoch, done: make(chan struct{})}
	ghost.store(t.Context(), late, []byte("late, after the new value"))
	ghost.storeError(t.Context(), late, errors.New("late error"))
	if ghost.Stats().Rejected != 3 {
		t.Fatalf("late stores after the new value: stats %+v", ghost.Stats())
	}
	st, err := b.lookup(t.Context(), "k")
	if err != nil || string(st.value) != string(r.e.Value) || st.valueEpoch != r.e.Epoch || st.errorFresh {
		t.Fatalf("stored entry %+v, %v; want b's value of epoch %d", st, err, r.e.Epoch)
	}
}

// A fetch that takes several lease lengths keeps its lease by renewing it: nobody takes over.
func TestRenewalKeepsSlowFetch(t *testing.T) {
	t.Parallel()
	url := dbtest.NewDB(t)
	lease := 1500 * time.Millisecond
	src := newFakeSource(t, true)
	a := newCache(t, url, src, Config{LeaseTTL: lease}, true)
	b := newCache(t, url, src, Config{LeaseTTL: lease}, true)
	ra := getAsync(t.Context(), a, "k")
	testutil.WaitFor(t, 30*time.Second, "a to fetch", func() bool { return src.calls.Load() == 1 })
	rb := getAsync(t.Context(), b, "k")
	// b wakes at each expiry the database reports, finds the lease renewed, and waits again.
	testutil.WaitFor(t, 30*time.Second, "b to see the lease renewed several times", func() bool { return b.Stats().PollWakeups >= 3 })
	close(src.gate)
	for _, ch := range []<-chan result{ra, rb} {
		if r := recv(t, ch); r.err != nil {
			t.Fatal(r.err)
		}
	}
	if src.calls.Load() != 1 || b.Stats().Takeovers != 0 || a.Stats().LeaseLost != 0 {
		t.Fatalf("calls %d, a %+v, b %+v: want one fetch, no takeover", src.calls.Load(), a.Stats(), b.Stats())
	}
}

// A waiter is woken by NOTIFY (its poll interval is an hour), also after its LISTEN
// connection was killed and reopened.
func TestNotifyWakesWaiters(t *testing.T) {
	t.Parallel()
	url := dbtest.NewDB(t)
	cfg := Config{PollInterval: time.Hour, LeaseTTL: time.Minute, RenewInterval: time.Second, MaxFetchTime: 30 * time.Second}
	src := newFakeSource(t, true)
	a := newCache(t, url, src, cfg, true)
	b := newCache(t, url, src, cfg, true)
	for round, key := range []string{"before", "after-reconnect"} {
		if round == 1 {
			if _, err := a.db.Exec(t.Context(), `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
				WHERE datname = current_database() AND query LIKE 'LISTEN%'`); err != nil {
				t.Fatal(err)
			}
			testutil.WaitFor(t, 30*time.Second, "both to reconnect", func() bool {
				return b.Stats().Reconnects >= 1 && b.Listening() && a.Stats().Reconnects >= 1 && a.Listening()
			})
			src.gate = make(chan struct{})
		}
		calls := src.calls.Load()
		ra := getAsync(t.Context(), a, key)
		testutil.WaitFor(t, 30*time.Second, "a to fetch", func() bool { return src.calls.Load() == calls+1 })
		waits := b.Stats().Waits
		rb := getAsync(t.Context(), b, key)
		testutil.WaitFor(t, 30*time.Second, "b to wait", func() bool { return b.Stats().Waits > waits })
		wakeups := b.Stats().NotifyWakeups
		close(src.gate)
		for _, ch := range []<-chan result{ra, rb} {
			if r := recv(t, ch); r.err != nil {
				t.Fatal(r.err)
			}
		}
		if b.Stats().NotifyWakeups <= wakeups || b.Stats().PollWakeups != 0 {
			t.Fatalf("%s: b's stats %+v: want a notify wake-up and no poll", key, b.Stats())
		}
	}
}

// Without a LISTEN connection (the cache is not Run) a waiter still gets the result by
// polling.
func TestPollingOnlyFallback(t *testing.T) {
	t.Parallel()
	url := dbtest.NewDB(t)
	src := newFakeSource(t, true)
	a := newCache(t, url, src, Config{}, false)
	b := newCache(t, url, src, Config{PollInterval: 50 * time.Millisecond}, false)
	ra := getAsync(t.Context(), a, "k")
	testutil.WaitFor(t, 30*time.Second, "a to fetch", func() bool { return src.calls.Load() == 1 })
	rb := getAsync(t.Context(), b, "k")
	testutil.WaitFor(t, 30*time.Second, "b to poll", func() bool { return b.Stats().PollWakeups >= 2 })
	close(src.gate)
	var epochs []int64
	for _, ch := range []<-chan result{ra, rb} {
		r := recv(t, ch)
		if r.err != nil {
			t.Fatal(r.err)
		}
		epochs = append(epochs, r.e.Epoch)
	}
	if epochs[0] != epochs[1] || src.calls.Load() != 1 || b.Stats().NotifyWakeups != 0 {
		t.Fatalf("epochs %v, calls %d, b %+v", epochs, src.calls.Load(), b.Stats())
	}
}

// A source error reaches the fetcher's caller (with the original error) and the waiters of
// every instance (with its message), is kept as a negative result for ErrorTTL without
// calling the source again, and is forgotten by Invalidate.
func TestSourceErrorPassedToWaitersAndKept(t *testing.T) {
	t.Parallel()
	url := dbtest.NewDB(t)
	boom := errors.New("origin says 503")
	src := newFakeSource(t, true)
	src.err = boom
	cfg := Config{ErrorTTL: time.Minute}
	a := newCache(t, url, src, cfg, true)
	b := newCache(t, url, src, cfg, true)
	ra := getAsync(t.Context(), a, "k")
	testutil.WaitFor(t, 30*time.Second, "a to fetch", func() bool { return src.calls.Load() == 1 })
	rb := getAsync(t.Context(), b, "k")
	testutil.WaitFor(t, 30*time.Second, "b to wait", func() bool { return b.Stats().Waits > 0 })
	close(src.gate)
	var se *SourceError
	r := recv(t, ra)
	if !errors.As(r.err, &se) || !errors.Is(r.err, boom) {
		t.Fatalf("fetcher's caller: %v, want a SourceError wrapping %v", r.err, boom)
	}
	epoch := se.Epoch
	r = recv(t, rb)
	if !errors.As(r.err, &se) || se.Epoch != epoch || se.Message != boom.Error() {
		t.Fatalf("waiter: %v, want the SourceError of epoch %d", r.err, epoch)
	}
	if _, err := b.Get(t.Context(), "k"); !errors.As(err, &se) || src.calls.Load() != 1 {
		t.Fatalf("Get within ErrorTTL: %v after %d calls, want the kept error and no new call", err, src.calls.Load())
	}
	src.err = nil
	if err := b.Invalidate(t.Context(), "k"); err != nil {
		t.Fatal(err)
	}
	if e, err := b.Get(t.Context(), "k"); err != nil || e.Epoch <= epoch || src.calls.Load() != 2 {
		t.Fatalf("after Invalidate: %+v, %v, %d calls", e, err, src.calls.Load())
	}
}

// A source call that passes MaxFetchTime is cancelled and stored as a negative result.
func TestMaxFetchTime(t *testing.T) {
	t.Parallel()
	url := dbtest.NewDB(t)
	src := newFakeSource(t, true) // never released: only the MaxFetchTime cancels it
	a := newCache(t, url, src, Config{MaxFetchTime: 300 * time.Millisecond}, false)
	_, err := a.Get(t.Context(), "k")
	var se *SourceError
	if !errors.As(err, &se) || !strings.Contains(se.Message, "MaxFetchTime") || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want a SourceError naming MaxFetchTime", err)
	}
}

// A caller's deadline is honoured while it waits and while it is the fetcher; the fetch it
// started goes on and its result serves the next caller without a second source call.
func TestCallerDeadlineHonoured(t *testing.T) {
	t.Parallel()
	url := dbtest.NewDB(t)
	src := newFakeSource(t, true)
	a := newCache(t, url, src, Config{}, true)
	b := newCache(t, url, src, Config{}, true)
	for _, c := range []*Cache{a, b} { // a fetches, b waits
		ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
		start := time.Now()
		_, err := c.Get(ctx, "k")
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("got %v, want the caller's deadline", err)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Fatalf("Get returned %s after a 200ms deadline", d)
		}
	}
	close(src.gate)
	e, err := b.Get(t.Context(), "k")
	if err != nil || src.calls.Load() != 1 || e.Stale {
		t.Fatalf("after the deadlines: %+v, %v, %d calls; want the first fetch's value", e, err, src.calls.Load())
	}
}

// Stopping a cache mid-fetch releases the lease so that another instance fetches at once,
// and its Gets return ErrStopped.
func TestStopReleasesLease(t *testing.T) {
	t.Parallel()
	url := dbtest.NewDB(t)
	src := newFakeSource(t, true)
	a, err := New(openDB(t, url, ""), src, Config{LeaseTTL: time.Hour, RenewInterval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() { _ = a.Run(ctx) })
	ra := getAsync(t.Context(), a, "k")
	testutil.WaitFor(t, 30*time.Second, "a to fetch", func() bool { return src.calls.Load() == 1 })
	cancel()
	wg.Wait()
	if r := recv(t, ra); !errors.Is(r.err, ErrStopped) {
		t.Fatalf("a's Get after stop: %v, want ErrStopped", r.err)
	}
	b := newCache(t, url, newFakeSource(t, false), Config{}, false)
	ctx2, cancel2 := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel2()
	if e, err := b.Get(ctx2, "k"); err != nil || b.Stats().Fetches != 1 {
		t.Fatalf("b after a stopped: %+v, %v, stats %+v (the lease is an hour long: it must have been released)", e, err, b.Stats())
	}
}

// Invalidate during a fetch: the fetch began before the invalidation, so its value is stored
// already stale; its waiters get it, and the next Get fetches again.
func TestInvalidateDuringFetch(t *testing.T) {
	t.Parallel()
	url := dbtest.NewDB(t)
	src := newFakeSource(t, true)
	a := newCache(t, url, src, Config{}, true)
	ra := getAsync(t.Context(), a, "k")
	testutil.WaitFor(t, 30*time.Second, "a to fetch", func() bool { return src.calls.Load() == 1 })
	if err := a.Invalidate(t.Context(), "k"); err != nil {
		t.Fatal(err)
	}
	close(src.gate)
	r := recv(t, ra)
	if r.err != nil || !r.e.Stale {
		t.Fatalf("the fetch's waiter got %+v, %v; want its value marked stale", r.e, r.err)
	}
	e, err := a.Get(t.Context(), "k")
	if err != nil || e.Stale || e.Epoch <= r.e.Epoch || src.calls.Load() != 2 {
		t.Fatalf("next Get: %+v, %v, %d calls; want a new fetch", e, err, src.calls.Load())
	}
}
