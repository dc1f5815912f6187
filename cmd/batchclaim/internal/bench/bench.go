package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batchclaim/batchclaim/claims"
	"github.com/batchclaim/batchclaim/cmd/batchclaim/internal/database"
	"github.com/batchclaim/batchclaim/pgdb"
)

// benchPhase is what one phase of `batchclaim bench` measured.
type benchPhase struct {
	Name            string  `json:"name"`
	Seconds         float64 `json:"seconds"`
	Cycles          int64   `json:"cycles"`
	CyclesPerSecond float64 `json:"cycles_per_second"`
	Retries         int64   `json:"serialization_retries"`
	RetryPercent    float64 `json:"retry_percent"`
	GiveUps         int64   `json:"give_ups"`
	P50Millis       float64 `json:"cycle_p50_ms"`
	P99Millis       float64 `json:"cycle_p99_ms"`
	OwnerChanges    int64   `json:"ownership_changes"`
}

// benchTotals are the tables' row-update counters over the whole run, read after every
// instance disconnected (Postgres reports a session's counters when it ends at the latest).
type benchTotals struct {
	ClaimRowUpdates    int64 `json:"claim_row_updates"`
	InstanceRowUpdates int64 `json:"instance_row_updates"`
	OwnerChanges       int64 `json:"ownership_changes"`
	Cycles             int64 `json:"cycles"`
}

// cycleConfig is the shape of a cycle run.
type cycleConfig struct {
	instances, serviceIDs int
	duration              time.Duration // of the steady phase
}

// cycleResult is what the cycle scenario measured: its two phases, acquire and steady, and
// the row updates over both.
type cycleResult struct {
	instances, serviceIDs int
	phases                []benchPhase
	totals                benchTotals
}

// json is the cycle scenario's JSON line.
func (r cycleResult) json() map[string]any {
	steady := r.phases[len(r.phases)-1]
	return map[string]any{"scenario": "cycle", "instances": r.instances, "service_ids": r.serviceIDs,
		"cycles_per_second": steady.CyclesPerSecond, "phases": r.phases, "totals": r.totals}
}

func (r cycleResult) print(w io.Writer) {
	fmt.Fprintf(w, "cycle: %d instances cycling flat out over %d service_ids\n\n", r.instances, r.serviceIDs)
	fmt.Fprintf(w, "%-8s %8s %8s %9s %8s %7s %8s %8s %13s\n", "phase", "seconds", "cycles", "cycles/s", "retries", "retry%", "p50 ms", "p99 ms", "owner changes")
	for _, p := range r.phases {
		fmt.Fprintf(w, "%-8s %8.1f %8d %9.0f %8d %6.2f%% %8.1f %8.1f %13d\n", p.Name, p.Seconds, p.Cycles, p.CyclesPerSecond,
			p.Retries, p.RetryPercent, p.P50Millis, p.P99Millis, p.OwnerChanges)
	}
	fmt.Fprintf(w, "\nrow updates over the run: service_id_claims %d (ownership changes %d), instances %d (cycles %d)\n\n",
		r.totals.ClaimRowUpdates, r.totals.OwnerChanges, r.totals.InstanceRowUpdates, r.totals.Cycles)
}

// benchCycle measures the claim cycle into r.
func benchCycle(ctx context.Context, instances, serviceIDs int, duration time.Duration, keep bool, info io.Writer, r *cycleResult) error {
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	db, err := database.NewScratch(ctx, "batchclaim_bench", keep, info, logger)
	if err != nil {
		return err
	}
	defer db.Close(ctx)
	admin, err := database.Open(ctx, db.URL, 2)
	if err != nil {
		return err
	}
	defer admin.Close()
	ids := make([]string, serviceIDs)
	for i := range ids {
		ids[i] = fmt.Sprintf("bench-%06d", i)
	}
	if err := claims.RegisterServiceIDs(ctx, admin, ids...); err != nil {
		return err
	}
	engines := make([]*claims.Engine, instances)
	var pools []*pgxpool.Pool
	defer func() {
		for _, p := range pools {
			p.Close()
		}
	}()
	for i := range engines {
		pool, err := database.Open(ctx, db.URL, 2)
		if err != nil {
			return err
		}
		pools = append(pools, pool)
		pdb, err := pgdb.Open(pool, "")
		if err != nil {
			return err
		}
		if engines[i], err = claims.New(pdb, claims.Config{Name: fmt.Sprintf("bench-%d", i)}); err != nil {
			return err
		}
		if err := engines[i].Register(ctx); err != nil {
			return err
		}
	}
	b := bench{engines: engines, admin: admin, k: serviceIDs}
	acquire, err := b.phase(ctx, "acquire", 0)
	if err != nil {
		return err
	}
	steady, err := b.phase(ctx, "steady", duration)
	if err != nil {
		return err
	}
	phases := []benchPhase{acquire, steady}
	for _, p := range pools {
		p.Close()
	}
	pools = nil
	totals, err := b.totals(ctx, acquire.Cycles+steady.Cycles)
	if err != nil {
		return err
	}
	*r = cycleResult{instances: instances, serviceIDs: serviceIDs, phases: phases, totals: totals}
	return nil
}

type bench struct {
	engines []*claims.Engine
	admin   *pgxpool.Pool
	k       int
}

// phase runs every engine flat out, for d, or (d == 0) until the claims are balanced.
func (b *bench) phase(ctx context.Context, name string, d time.Duration) (benchPhase, error) {
	before, err := b.ownerChanges(ctx)
	if err != nil {
		return benchPhase{}, err
	}
	var retries0, give0 int64
	for _, e := range b.engines {
		retries0 += e.Stats().SerializationRetries
		give0 += e.Stats().SerializationGiveUps
	}
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if d > 0 {
		pctx, cancel = context.WithTimeout(pctx, d)
		defer cancel()
	}
	var mu sync.Mutex
	var lat []time.Duration
	held := make([]int, len(b.engines))
	var firstErr error
	start := time.Now()
	var wg sync.WaitGroup
	for i, e := range b.engines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for pctx.Err() == nil {
				t := time.Now()
				rep, err := e.Cycle(pctx)
				if pctx.Err() != nil {
					return
				}
				mu.Lock()
				lat = append(lat, time.Since(t))
				held[i] = rep.Held
				if err != nil && firstErr == nil {
					firstErr = err
				}
				if d == 0 && balanced2(held, b.k) {
					cancel()
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if firstErr != nil && d == 0 {
		return benchPhase{}, firstErr
	}
	p := benchPhase{Name: name, Seconds: time.Since(start).Seconds(), Cycles: int64(len(lat))}
	for _, e := range b.engines {
		p.Retries += e.Stats().SerializationRetries
		p.GiveUps += e.Stats().SerializationGiveUps
	}
	p.Retries -= retries0
	p.GiveUps -= give0
	p.CyclesPerSecond = float64(p.Cycles) / p.Seconds
	if p.Cycles > 0 {
		p.RetryPercent = 100 * float64(p.Retries) / float64(p.Cycles)
		slices.Sort(lat)
		p.P50Millis = float64(lat[len(lat)/2].Microseconds()) / 1000
		p.P99Millis = float64(lat[len(lat)*99/100].Microseconds()) / 1000
	}
	after, err := b.ownerChanges(ctx)
	p.OwnerChanges = after - before
	return p, err
}

// balanced2: every claim held and no two instances differ by more than one.
func balanced2(held []int, k int) bool {
	total, lo, hi := 0, held[0], held[0]
	for _, h := range held {
		total += h
		lo, hi = min(lo, h), max(hi, h)
	}
	return total == k && hi-lo <= 1
}

func (b *bench) ownerChanges(ctx context.Context) (int64, error) {
	var n int64
	err := b.admin.QueryRow(ctx, `SELECT count(*) FROM batchclaim.claim_events`).Scan(&n)
	return n, err
}

// totals reads the tables' row-update counters once every instance has disconnected.
func (b *bench) totals(ctx context.Context, cycles int64) (benchTotals, error) {
	t := benchTotals{Cycles: cycles}
	var err error
	if t.OwnerChanges, err = b.ownerChanges(ctx); err != nil {
		return t, err
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		var sessions int
		if err := b.admin.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`).Scan(&sessions); err != nil {
			return t, err
		}
		if sessions == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := b.admin.Exec(ctx, `SELECT pg_stat_clear_snapshot()`); err != nil {
		return t, err
	}
	err = b.admin.QueryRow(ctx, `SELECT
		(SELECT n_tup_upd FROM pg_stat_user_tables WHERE relname = 'service_id_claims'),
		(SELECT n_tup_upd FROM pg_stat_user_tables WHERE relname = 'instances')`).Scan(&t.ClaimRowUpdates, &t.InstanceRowUpdates)
	return t, err
}
