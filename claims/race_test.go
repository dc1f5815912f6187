package claims_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batchclaim/batchclaim/claims"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
)

// TestConcurrentInstances runs 8 instances, each on its own connections, over 2,000
// service_ids for 30 cycles with instances joining and leaving, and checks the recorded
// history, the balance at rest, and how many claims a join or a leave moves.
func TestConcurrentInstances(t *testing.T) {
	t.Parallel()
	const serviceIDs, rounds = 2000, 30
	ctx := t.Context()
	url := dbtest.NewDB(t)
	admin := newPool(t, url)
	registerServiceIDs(t, admin, serviceIDs)

	engines := make([]*claims.Engine, 10)
	start := func(n int) *claims.Engine {
		e, _ := newEngine(t, newPool(t, url), n, nil)
		engines[n] = e
		return e
	}
	for n := range 6 {
		start(n)
	}
	// Instances 0-5 run from the start; 6 and 7 join at round 10; 2 and 4 leave (graceful
	// stop) at round 20.
	joined := make(chan struct{})
	var joinOnce sync.Once
	join := func() { joinOnce.Do(func() { close(joined) }) }
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	run := func(e *claims.Engine, from, leaveAt int) {
		defer wg.Done()
		if e == engines[0] {
			defer join() // also when it fails early: the joiners must not wait forever
		}
		for r := from; r < rounds; r++ {
			if r == 10 && e == engines[0] {
				join()
			}
			if r == leaveAt {
				if err := e.Shutdown(ctx); err != nil {
					errs <- fmt.Errorf("%s shutdown: %w", e.Name(), err)
				}
				return
			}
			if _, err := e.Cycle(ctx); err != nil {
				errs <- fmt.Errorf("%s round %d: %w", e.Name(), r, err)
				return
			}
		}
	}
	for n := range 6 {
		leave := -1
		if n == 2 || n == 4 {
			leave = 20
		}
		wg.Add(1)
		go run(engines[n], 0, leave)
	}
	wg.Add(2)
	go func() {
		<-joined
		go run(start(6), 10, -1)
		run(start(7), 10, -1)
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		return
	}

	live := []*claims.Engine{engines[0], engines[1], engines[3], engines[5], engines[6], engines[7]}
	quiesce(t, admin, live, serviceIDs)
	checkHistory(t, admin)

	var retries, cycles int64
	for _, e := range engines[:8] {
		retries += e.Stats().SerializationRetries
		cycles += e.Stats().Cycles
	}
	t.Logf("concurrent phase: %d serialization retries over %d cycles", retries, cycles)

	// A join moves about K/N claims: the newcomer's share, plus at most one per instance whose
	// rank-based +1 moved.
	before := acquiredCount(t, admin)
	live = append(live, start(8))
	quiesce(t, admin, live, serviceIDs)
	moved := acquiredCount(t, admin) - before
	if limit := serviceIDs/len(live) + 1 + len(live); moved > limit {
		t.Errorf("a join moved %d claims, want at most %d (K/N + 1 + N)", moved, limit)
	}
	t.Logf("join of a 7th instance moved %d claims", moved)

	// A graceful leave moves the leaver's claims (about K/N) and little else.
	before = acquiredCount(t, admin)
	if err := live[0].Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	live = live[1:]
	quiesce(t, admin, live, serviceIDs)
	moved = acquiredCount(t, admin) - before
	if limit := serviceIDs/len(live) + 1 + len(live); moved > limit {
		t.Errorf("a leave moved %d claims, want at most %d (K/N + 1 + N)", moved, limit)
	}
	t.Logf("leave of an instance moved %d claims", moved)
	checkHistory(t, admin)
}

// quiesce cycles the instances round-robin until no claim is free and the claim counts
// stop changing, then checks the balance: max - min <= 1.
func quiesce(t *testing.T, pool *pgxpool.Pool, live []*claims.Engine, k int) {
	t.Helper()
	var prev []int
	for round := range 20 {
		counts := make([]int, len(live))
		for i, e := range live {
			counts[i] = cycle(t, e).Held
		}
		got := owners(t, pool)
		total := 0
		for i, e := range live {
			counts[i] = countOwned(got, e)
			total += counts[i]
		}
		if total == k && fmt.Sprint(counts) == fmt.Sprint(prev) {
			lo, hi := counts[0], counts[0]
			for _, c := range counts {
				lo, hi = min(lo, c), max(hi, c)
			}
			if hi-lo > 1 {
				t.Fatalf("at rest the claim counts are %v: max - min = %d, want <= 1", counts, hi-lo)
			}
			t.Logf("quiescent after %d rounds: %v", round+1, counts)
			return
		}
		prev = counts
	}
	t.Fatalf("no quiescence after 20 rounds; last counts %v", prev)
}

func acquiredCount(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(t.Context(), `SELECT count(*) FROM batchclaim.claim_events WHERE event = 'acquired'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func newPool(t testing.TB, url string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 2
	p, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}
