package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batchclaim/batchclaim/claims"
	"github.com/batchclaim/batchclaim/cmd/batchclaim/internal/database"
	"github.com/batchclaim/batchclaim/pgdb"
)

// churnConfig is the shape of a churn run.
type churnConfig struct {
	keys, active, engines int
	renew, dropIdle       time.Duration
	window                time.Duration // steady window over which cycles and statements are measured
	chunk                 int           // claims.Config.ChunkSize; 0: the engine's default
	drainLimit            time.Duration // stop waiting for the idle rows to go after this long
	keep                  bool
}

// churnPhase is what one side of the churn scenario measured.
type churnPhase struct {
	KeysEverSeen int   `json:"keys_ever_seen"`
	DropIdleMs   int64 `json:"drop_idle_after_ms"`
	RowsAtStart  int   `json:"claim_rows_at_start"`
	// How long after the engines' start the claims table was down to the keys with work
	// (null when it had nothing else, or never got there), and the rows left when the steady
	// window began.
	DrainSeconds *float64 `json:"seconds_to_drop_idle_rows"`
	RowsLeft     int      `json:"claim_rows_left"`
	Dropped      int64    `json:"rows_dropped"`
	// Acquisitions (claim events) from the engines' start to the end: with idle free rows
	// dropped before anyone acquires them, about the keys with work.
	Acquired int64 `json:"acquisitions"`
	// Cycles that ended while the idle rows were being acquired and dropped.
	DrainCycles int     `json:"drain_cycles"`
	DrainP50Ms  float64 `json:"drain_cycle_p50_ms"`
	DrainP99Ms  float64 `json:"drain_cycle_p99_ms"`
	DrainMaxMs  float64 `json:"drain_cycle_max_ms"`
	// Idle rows gone per second, from the engines' start until they were all gone or the
	// bench stopped waiting.
	DropRate float64 `json:"dropped_rows_per_second"`
	// From the engines' start until the rows left were balanced (null when the idle rows
	// were not all gone in time).
	BalanceSecs  *float64 `json:"seconds_to_balance"`
	SelfFencings int64    `json:"self_fencings"`
	// The window: the keys with work balanced over the engines and nothing else (steady), or,
	// when the idle rows were not all gone in time, the cycles while they are being dropped.
	Steady bool `json:"steady"`
	churnWindow
	// Once the idle rows were gone: the same window again after a VACUUM of the claims
	// table, which autovacuum would have run by then (null when there were no idle rows or
	// they were not all gone).
	AfterVacuum *churnWindow `json:"after_vacuum"`

	autovacuum string // the server's setting
}

// churnWindow is what a measuring window saw.
type churnWindow struct {
	WindowSeconds float64    `json:"window_seconds"`
	Cycles        int        `json:"cycles"`
	CycleErrors   int64      `json:"cycle_errors"`
	P50Ms         float64    `json:"cycle_p50_ms"`
	P99Ms         float64    `json:"cycle_p99_ms"`
	Statements    float64    `json:"statements_per_instance_per_interval"`
	ByStatement   []stmtStat `json:"statements"`
	// Note says why a figure is missing (no cycle ended within the window).
	Note string `json:"note,omitempty"`
}

// churnResult is the churn scenario's JSON line.
type churnResult struct {
	Scenario   string `json:"scenario"`
	Engines    int    `json:"engines"`
	KeysActive int    `json:"keys_with_work"`
	Keys       int    `json:"keys_ever_seen"`
	RenewMs    int64  `json:"renew_interval_ms"`
	DropIdleMs int64  `json:"drop_idle_after_ms"`
	ChunkSize  int    `json:"chunk_size"`
	// The keys with work alone: engines that never drop rows, and engines that drop idle
	// rows as the churn side's do; then the keys with work among every key ever seen.
	Baseline     churnPhase `json:"baseline"`
	BaselineDrop churnPhase `json:"baseline_drop_idle"`
	Churn        churnPhase `json:"churn"`
	Method       string     `json:"method"`
	// The server's autovacuum setting: the bench analyzes the claims table itself while
	// rows are dropped, and nothing vacuums it when this is off.
	Autovacuum string `json:"server_autovacuum"`
}

// churnMethod says how the cycles were timed.
const churnMethod = "engines run Engine.Run (cycles every R, the lease renewed by its own loop on its own connection); " +
	"a cycle is timed from the start of its first statement (ClaimsSurvey) to the end of its last, as a pgx tracer " +
	"on the engine's pool sees them, so the renewals are no part of it; statements are counted by the same tracer, renewals included; each window starts after a CHECKPOINT"

func (r churnResult) print(w io.Writer) {
	fmt.Fprintf(w, "churn: %d claim engines (Engine.Run) in this process, R %s, chunk %d rows; %d keys with work (one unfinished batch each)\n",
		r.Engines, time.Duration(r.RenewMs)*time.Millisecond, r.ChunkSize, r.KeysActive)
	phases := []churnPhase{r.Baseline, r.BaselineDrop, r.Churn}
	row := func(label string, f func(p churnPhase) string) {
		fmt.Fprintf(w, "  %-44s", label)
		for _, p := range phases {
			fmt.Fprintf(w, " %16s", f(p))
		}
		fmt.Fprintln(w)
	}
	d := func(v int64) string { return strconv.FormatInt(v, 10) }
	f2 := func(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }
	row("keys ever seen", func(p churnPhase) string { return d(int64(p.KeysEverSeen)) })
	row("drop idle claim rows after", func(p churnPhase) string {
		if p.DropIdleMs == 0 {
			return "never"
		}
		return (time.Duration(p.DropIdleMs) * time.Millisecond).String()
	})
	row("claim rows at start", func(p churnPhase) string { return d(int64(p.RowsAtStart)) })
	row("seconds until only keys with work had rows", func(p churnPhase) string {
		if p.DrainSeconds == nil {
			if p.RowsAtStart > r.KeysActive {
				return "not reached"
			}
			return "-"
		}
		return strconv.FormatFloat(*p.DrainSeconds, 'f', 1, 64)
	})
	row("rows dropped (rows/s until then)", func(p churnPhase) string {
		if p.DropRate == 0 {
			return d(p.Dropped)
		}
		return fmt.Sprintf("%d (%.0f/s)", p.Dropped, p.DropRate)
	})
	row("acquisitions", func(p churnPhase) string { return d(p.Acquired) })
	row("cycle p50 / p99 / max ms meanwhile", func(p churnPhase) string {
		if p.DrainCycles == 0 {
			return "-"
		}
		return fmt.Sprintf("%.0f / %.0f / %.0f", p.DrainP50Ms, p.DrainP99Ms, p.DrainMaxMs)
	})
	row("self-fencings", func(p churnPhase) string { return d(p.SelfFencings) })
	row("claim rows left", func(p churnPhase) string { return d(int64(p.RowsLeft)) })
	row("window seconds", func(p churnPhase) string {
		w := strconv.FormatFloat(p.WindowSeconds, 'f', 1, 64)
		if !p.Steady {
			w += " NOT steady"
		}
		return w
	})
	row("cycles", func(p churnPhase) string { return d(int64(p.Cycles)) })
	row("cycle p50 ms", func(p churnPhase) string { return f2(p.P50Ms) })
	row("cycle p99 ms", func(p churnPhase) string { return f2(p.P99Ms) })
	row("statements per instance per renew interval", func(p churnPhase) string { return f2(p.Statements) })
	names := map[string]bool{}
	for _, p := range phases {
		for _, s := range p.ByStatement {
			names[s.Name] = true
		}
	}
	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, n)
	}
	slices.Sort(sorted)
	for _, n := range sorted {
		row("  "+n, func(p churnPhase) string {
			for _, s := range p.ByStatement {
				if s.Name == n {
					return f2(s.PerUnit)
				}
			}
			return f2(0)
		})
	}
	if v := r.Churn.AfterVacuum; v != nil {
		fmt.Fprintf(w, "  after a VACUUM of the claims table, %d keys ever seen: %d cycles, p50 %.2f ms, p99 %.2f ms, %.2f statements per instance per renew interval\n",
			r.Churn.KeysEverSeen, v.Cycles, v.P50Ms, v.P99Ms, v.Statements)
	}
	fmt.Fprintf(w, "  (%s; the bench ran ANALYZE on the claims table every 5 s while rows were dropped; server autovacuum: %s)\n\n", r.Method, r.Autovacuum)
}

// benchChurn measures the claim engine over the keys with work alone (the baseline, with
// and without dropping idle rows), then over those among many more keys ever seen whose idle
// claim rows the engines drop.
func benchChurn(ctx context.Context, c churnConfig, info io.Writer) (churnResult, error) {
	r := churnResult{Scenario: "churn", Engines: c.engines, KeysActive: c.active, Keys: c.keys,
		RenewMs: c.renew.Milliseconds(), DropIdleMs: c.dropIdle.Milliseconds(), ChunkSize: c.chunk, Method: churnMethod}
	if r.ChunkSize == 0 {
		r.ChunkSize = claims.ChunkSizeDefault
	}
	var err error
	if r.Baseline, err = churnRun(ctx, c, c.active, 0, info); err != nil {
		return r, fmt.Errorf("baseline: %w", err)
	}
	if r.BaselineDrop, err = churnRun(ctx, c, c.active, c.dropIdle, info); err != nil {
		return r, fmt.Errorf("baseline dropping idle rows: %w", err)
	}
	if r.Churn, err = churnRun(ctx, c, c.keys, c.dropIdle, info); err != nil {
		return r, fmt.Errorf("%d keys: %w", c.keys, err)
	}
	r.Autovacuum = r.Churn.autovacuum
	return r, nil
}

// churnRun runs one side: a scratch database with keys claim rows, of which c.active have
// an unfinished batch; engines running until only those rows are left and they are
// balanced; then the steady window.
func churnRun(ctx context.Context, c churnConfig, keys int, dropIdle time.Duration, info io.Writer) (churnPhase, error) {
	p := churnPhase{KeysEverSeen: keys, RowsAtStart: keys, DropIdleMs: dropIdle.Milliseconds()}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	db, err := database.NewScratch(ctx, "batchclaim_bench_churn", c.keep, info, logger)
	if err != nil {
		return p, err
	}
	defer db.Close(ctx)
	admin, err := database.Open(ctx, db.URL, 1)
	if err != nil {
		return p, err
	}
	defer admin.Close()
	if err := admin.QueryRow(ctx, `SHOW autovacuum`).Scan(&p.autovacuum); err != nil {
		return p, err
	}
	if idle := keys - c.active; idle > 0 {
		fmt.Fprintf(info, "churn: storing %d idle claim rows\n", idle)
		src := pgx.CopyFromSlice(idle, func(i int) ([]any, error) { return []any{fmt.Sprintf("idle-%07d", i)}, nil })
		if _, err := admin.CopyFrom(ctx, pgx.Identifier{"batchclaim", "service_id_claims"}, []string{"service_id"}, src); err != nil {
			return p, fmt.Errorf("store idle claim rows: %w", err)
		}
		if _, err := admin.Exec(ctx, `ANALYZE batchclaim.service_id_claims`); err != nil {
			return p, err
		}
	}
	// The keys with work: one unfinished batch each, stored through ingest, which creates
	// their claim rows.
	if err := benchStore(ctx, db.URL, c.active, 1, 0, func(string, int) (string, []byte) { return "", nil }); err != nil {
		return p, err
	}

	counter := NewStmtCounter()
	clocks := make([]*cycleClock, c.engines)
	var pools []*pgxpool.Pool
	defer func() {
		for _, pl := range pools {
			pl.Close()
		}
	}()
	engines := make([]*claims.Engine, c.engines)
	for i := range engines {
		clocks[i] = &cycleClock{StmtCounter: counter}
		pool, err := openTracedPool(ctx, db.URL, 2, clocks[i])
		if err != nil {
			return p, err
		}
		pools = append(pools, pool)
		pdb, err := pgdb.Open(pool, "")
		if err != nil {
			return p, err
		}
		engines[i], err = claims.New(pdb, claims.Config{Name: fmt.Sprintf("churn-%d", i), RenewInterval: c.renew,
			Expiry1: 6 * c.renew, Expiry2: 24 * c.renew, DropIdleAfter: dropIdle, ChunkSize: c.chunk, Logger: logger})
		if err != nil {
			return p, err
		}
		if err := engines[i].Register(ctx); err != nil {
			return p, err
		}
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	start := time.Now()
	for _, e := range engines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = e.Run(runCtx)
		}()
	}
	defer func() {
		stop()
		wg.Wait()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		for _, e := range engines {
			_ = e.Shutdown(sctx)
		}
	}()
	var times []time.Duration
	take := func() {
		for _, cl := range clocks {
			times = append(times, cl.take()...)
		}
		slices.Sort(times)
	}

	// Until only the keys with work have claim rows. The bench refreshes the planner's
	// statistics of the claims table as autovacuum would (it may be off, and is slow to
	// notice): statistics taken when every row was free make the engines' plans for the
	// rows they hold very slow.
	deadline := start.Add(c.drainLimit)
	lastReport, lastAnalyze := time.Now(), time.Now()
	for keys > c.active {
		if time.Since(lastAnalyze) >= 5*time.Second {
			if _, err := admin.Exec(ctx, `ANALYZE batchclaim.service_id_claims`); err != nil {
				return p, err
			}
			lastAnalyze = time.Now()
		}
		if err := admin.QueryRow(ctx, `SELECT count(*) FROM batchclaim.service_id_claims`).Scan(&p.RowsLeft); err != nil {
			return p, err
		}
		if p.RowsLeft <= c.active {
			s := round3(time.Since(start).Seconds())
			p.DrainSeconds = &s
			break
		}
		if time.Now().After(deadline) {
			fmt.Fprintf(info, "churn: %d claim rows still there after %s; measuring anyway\n", p.RowsLeft, c.drainLimit)
			break
		}
		if time.Since(lastReport) >= 10*time.Second {
			fmt.Fprintf(info, "churn: %d claim rows left after %.0fs\n", p.RowsLeft, time.Since(start).Seconds())
			lastReport = time.Now()
		}
		select {
		case <-ctx.Done():
			return p, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
	if keys > c.active {
		p.DropRate = round3(float64(keys-p.RowsLeft) / time.Since(start).Seconds())
	}
	// Until the rows left are balanced over the engines (when the idle rows are gone: while
	// they are still being dropped the count moves).
	drained := p.RowsLeft <= c.active
	for drained {
		if err := admin.QueryRow(ctx, `SELECT count(*) FROM batchclaim.service_id_claims`).Scan(&p.RowsLeft); err != nil {
			return p, err
		}
		s, err := readSpread(ctx, admin)
		if err != nil {
			return p, err
		}
		if len(s.held) == c.engines && s.free == 0 && s.heldLive == p.RowsLeft && s.hi-s.lo <= 1 {
			b := round3(time.Since(start).Seconds())
			p.BalanceSecs = &b
			break
		}
		if time.Since(start) > c.drainLimit+60*time.Second {
			return p, fmt.Errorf("claims not balanced: %d rows, %d free, %d to %d per engine", p.RowsLeft, s.free, s.lo, s.hi)
		}
		select {
		case <-ctx.Done():
			return p, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	p.Steady = drained
	if keys > c.active {
		take()
		p.DrainCycles = len(times)
		p.DrainP50Ms, p.DrainP99Ms, p.DrainMaxMs = pct(times, 50), pct(times, 99), pct(times, 100)
	}
	if drained {
		fmt.Fprintf(info, "churn: %d keys ever seen: %d claim rows balanced after %.1fs; measuring for %s\n", keys, p.RowsLeft, *p.BalanceSecs, c.window)
	} else {
		fmt.Fprintf(info, "churn: %d keys ever seen: %d claim rows left after %s (%.0f rows/s dropped); measuring for %s while they are dropped\n",
			keys, p.RowsLeft, c.drainLimit, p.DropRate, c.window)
	}

	// The steady window, after a checkpoint has written out what setting up (or dropping a
	// million rows) left dirty, so that the server's background writes of it do not fall
	// into the window of one side and not the other.
	if _, err := admin.Exec(ctx, `CHECKPOINT`); err != nil {
		return p, err
	}
	if p.churnWindow, err = churnMeasure(ctx, c, engines, clocks, counter); err != nil {
		return p, err
	}
	for _, e := range engines {
		st := e.Stats()
		p.Dropped += st.Dropped
		p.SelfFencings += st.DeadlineFences
	}
	if err := admin.QueryRow(ctx, `SELECT count(*) FROM batchclaim.claim_events WHERE event = 'acquired'`).Scan(&p.Acquired); err != nil {
		return p, err
	}
	if keys > c.active && drained {
		fmt.Fprintf(info, "churn: VACUUM of the claims table, then measuring for %s again\n", c.window)
		if _, err := admin.Exec(ctx, `VACUUM (ANALYZE) batchclaim.service_id_claims`); err != nil {
			return p, err
		}
		if _, err := admin.Exec(ctx, `CHECKPOINT`); err != nil {
			return p, err
		}
		w, err := churnMeasure(ctx, c, engines, clocks, counter)
		if err != nil {
			return p, err
		}
		p.AfterVacuum = &w
	}
	return p, nil
}

// churnMeasure measures the engines' cycles and statements for c.window.
func churnMeasure(ctx context.Context, c churnConfig, engines []*claims.Engine, clocks []*cycleClock, counter *StmtCounter) (churnWindow, error) {
	var w churnWindow
	var errs0 int64
	t0 := time.Now()
	for i, e := range engines {
		errs0 += e.Stats().CycleErrors
		clocks[i].since(t0)
	}
	before := counter.snapshot()
	select {
	case <-ctx.Done():
		return w, ctx.Err()
	case <-time.After(c.window):
	}
	after := counter.snapshot()
	w.WindowSeconds = round3(time.Since(t0).Seconds())
	var times []time.Duration
	for _, cl := range clocks {
		times = append(times, cl.take()...)
	}
	slices.Sort(times)
	w.Cycles = len(times)
	if len(times) == 0 {
		w.Note = fmt.Sprintf("no claim cycle ended within the %s window: cycles take longer than that here (or no longer start with ClaimsSurvey, which the cycle timing relies on)", c.window)
	} else {
		w.P50Ms, w.P99Ms = pct(times, 50), pct(times, 99)
	}
	for _, e := range engines {
		w.CycleErrors += e.Stats().CycleErrors
	}
	w.CycleErrors -= errs0
	intervals := float64(c.engines) * w.WindowSeconds / c.renew.Seconds()
	var all int64
	for name, n := range after {
		d := n.Calls - before[name].Calls
		if d == 0 {
			continue
		}
		all += d
		ms := n.TotalMs - before[name].TotalMs
		w.ByStatement = append(w.ByStatement, stmtStat{Name: name, Calls: d, PerUnit: round3(float64(d) / intervals), TotalMs: round3(ms), MeanMs: round3(ms / float64(d))})
	}
	slices.SortFunc(w.ByStatement, func(a, b stmtStat) int {
		if a.Calls != b.Calls {
			return int(b.Calls - a.Calls)
		}
		return strings.Compare(a.Name, b.Name)
	})
	w.Statements = round3(float64(all) / intervals)
	return w, nil
}

// cycleClock times one engine's claim cycles from the statements its pool sends (and counts
// them, with its StmtCounter): a cycle begins with its first statement, the survey
// (ClaimsSurvey), and ends with the last statement before the next survey. The lease loop's
// renewals (InstanceHeartbeat, on a connection of its own) are no part of a cycle. A cycle is
// recorded when the next one begins, and only if it began at or after from: the cycle that
// was running when a window opened belongs to what came before (a slow one, before a VACUUM).
type cycleClock struct {
	*StmtCounter
	mu      sync.Mutex
	open    bool
	from    time.Time
	began   time.Time
	lastEnd time.Time
	times   []time.Duration
}

const (
	cycleFirstStatement = "ClaimsSurvey"
	renewalStatement    = "InstanceHeartbeat"
)

func (c *cycleClock) TraceQueryStart(ctx context.Context, conn *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	ctx = c.StmtCounter.TraceQueryStart(ctx, conn, d)
	if stmtName(d.SQL) == cycleFirstStatement {
		now := time.Now()
		c.mu.Lock()
		if c.open && !c.began.Before(c.from) {
			c.times = append(c.times, c.lastEnd.Sub(c.began))
		}
		c.open, c.began, c.lastEnd = true, now, now
		c.mu.Unlock()
	}
	return ctx
}

func (c *cycleClock) TraceQueryEnd(ctx context.Context, conn *pgx.Conn, d pgx.TraceQueryEndData) {
	c.StmtCounter.TraceQueryEnd(ctx, conn, d)
	if st, ok := ctx.Value(traceStartKey{}).(traceStart); ok && stmtName(st.sql) != renewalStatement {
		c.mu.Lock()
		c.lastEnd = time.Now()
		c.mu.Unlock()
	}
}

func (c *cycleClock) TraceBatchEnd(ctx context.Context, conn *pgx.Conn, d pgx.TraceBatchEndData) {
	c.StmtCounter.TraceBatchEnd(ctx, conn, d)
	c.mu.Lock()
	c.lastEnd = time.Now()
	c.mu.Unlock()
}

func (c *cycleClock) TraceCopyFromEnd(ctx context.Context, conn *pgx.Conn, d pgx.TraceCopyFromEndData) {
	c.StmtCounter.TraceCopyFromEnd(ctx, conn, d)
	c.mu.Lock()
	c.lastEnd = time.Now()
	c.mu.Unlock()
}

// since forgets the cycles recorded so far, and records from now on only cycles that begin
// at or after t.
func (c *cycleClock) since(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.from, c.times = t, nil
}

// take returns the cycles recorded since the last take.
func (c *cycleClock) take() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.times
	c.times = nil
	return t
}

// pct is the p-th percentile of sorted durations, in milliseconds (0 when there are none).
func pct(sorted []time.Duration, p int) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := min(len(sorted)*p/100, len(sorted)-1)
	return float64(sorted[i].Microseconds()) / 1000
}

// snapshot copies the counts per statement.
func (c *StmtCounter) snapshot() map[string]stmtStat {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]stmtStat, len(c.stats))
	for name, s := range c.stats {
		out[name] = *s
	}
	return out
}

// openTracedPool is database.Open with tracer on every connection of the pool.
func openTracedPool(ctx context.Context, dbURL string, maxConns int32, tracer pgx.QueryTracer) (*pgxpool.Pool, error) {
	return database.Open(ctx, dbURL, maxConns, func(cfg *pgxpool.Config) { cfg.ConnConfig.Tracer = tracer })
}
