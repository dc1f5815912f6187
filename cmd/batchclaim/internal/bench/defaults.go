package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/batchclaim/batchclaim/claims"
)

// defaultsConfig is the shape of a defaults run.
type defaultsConfig struct {
	serviceIDs, perKey int
	runFlags           []string
	readyzEvery        time.Duration
	limit              time.Duration
	keep               bool
}

// readyzCount is what the /readyz probes of one process got.
type readyzCount struct {
	Probes int `json:"probes"`
	Non200 int `json:"non_200"`
	// Failed: no answer within the probe timeout (1s, a Kubernetes probe's default), or no
	// connection. Counted apart from non_200.
	Failed int            `json:"failed"`
	ByCode map[string]int `json:"by_code"`
}

// defaultsResult is the defaults scenario's JSON line.
type defaultsResult struct {
	Scenario         string        `json:"scenario"`
	Processes        int           `json:"processes"`
	ServiceIDs       int           `json:"service_ids"`
	PerKey           int           `json:"batches_per_service_id"`
	RunArgs          []string      `json:"run_args"`
	Batches          int           `json:"batches"`
	Committed        int           `json:"committed"`
	Seconds          float64       `json:"seconds"`
	BatchesPerSecond float64       `json:"batches_per_second"`
	P50Ms            float64       `json:"stored_to_done_p50_ms"`
	P99Ms            float64       `json:"stored_to_done_p99_ms"`
	StatementsPer    float64       `json:"statements_per_batch"`
	ReadyzEveryMs    int64         `json:"readyz_interval_ms"`
	Readyz           []readyzCount `json:"readyz"`
	ReadyzNon200     int           `json:"readyz_non_200"`
	ReadyzFailed     int           `json:"readyz_failed"`
	Method           string        `json:"method"`
}

const defaultsMethod = "batches stored by one INSERT into batches per round (batch n of every service_id, then n+1) " +
	"once the processes hold every claim; the clock (database) from just before the first store to the write that " +
	"recorded the last batch COMMITTED; statements from both processes' batchclaim_db_statements_total"

func (r defaultsResult) print(w io.Writer) {
	fmt.Fprintf(w, "defaults: %d `batchclaim run` processes with default flags, ledger simulator at zero latency, %d service_ids x %d batches\n",
		r.Processes, r.ServiceIDs, r.PerKey)
	fmt.Fprintf(w, "  %d batches in %.1f s: %.0f batches/s; stored-to-done p50 %.0f ms, p99 %.0f ms; %.2f statements per batch\n",
		r.Committed, r.Seconds, r.BatchesPerSecond, r.P50Ms, r.P99Ms, r.StatementsPer)
	fmt.Fprintf(w, "  /readyz every %d ms on each process: ", r.ReadyzEveryMs)
	for i, z := range r.Readyz {
		if i > 0 {
			fmt.Fprint(w, "; ")
		}
		fmt.Fprintf(w, "%d probes, %d non-200, %d without an answer in 1s", z.Probes, z.Non200, z.Failed)
	}
	fmt.Fprintf(w, "\n  %s\n\n", strings.Join(r.RunArgs, " "))
}

// benchDefaults runs two processes with default flags on the ledger path and measures
// their rate while probing their /readyz.
func benchDefaults(ctx context.Context, c defaultsConfig, info io.Writer) (defaultsResult, error) {
	r := defaultsResult{Scenario: "defaults", Processes: 2, ServiceIDs: c.serviceIDs, PerKey: c.perKey, RunArgs: shownArgs(c.runFlags),
		Batches: c.serviceIDs * c.perKey, ReadyzEveryMs: c.readyzEvery.Milliseconds(), Method: defaultsMethod}
	db, admin, err := scratchWithAdmin(ctx, "batchclaim_bench_defaults", c.keep, info)
	if err != nil {
		return r, err
	}
	defer db.Close(ctx)
	defer admin.Close()
	ids := serviceIDs("df", c.serviceIDs)
	if err := claims.RegisterServiceIDs(ctx, admin, ids...); err != nil {
		return r, err
	}
	sim, simURL, logDir, err := startLedger("defaults")
	if err != nil {
		return r, err
	}
	defer sim.Close()
	f := &fleet{admin: admin, logDir: logDir, prefix: "df", k: c.serviceIDs, listen: true, args: func(name, listen string) []string {
		return runArgs(db.URL, simURL, name, listen, c.runFlags)
	}}
	defer f.stopAll()
	for range r.Processes {
		if err := f.start(); err != nil {
			return r, err
		}
	}
	fmt.Fprintf(info, "defaults: two processes started (logs in %s); waiting for the claims to balance\n", logDir)
	if err := f.waitReady(ctx, 3*time.Minute); err != nil {
		return r, err
	}
	before, err := scrapeAll(ctx, f.kids)
	if err != nil {
		return r, err
	}

	probeCtx, stopProbes := context.WithCancel(ctx)
	defer stopProbes()
	r.Readyz = make([]readyzCount, len(f.kids))
	var wg sync.WaitGroup
	for i, k := range f.kids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.Readyz[i] = probeReadyz(probeCtx, "http://"+k.listen+"/readyz", c.readyzEvery)
		}()
	}
	var start time.Time
	for n := range c.perKey {
		at, err := storeBatches(ctx, admin, ids, n)
		if err != nil {
			stopProbes()
			wg.Wait()
			return r, err
		}
		if n == 0 {
			start = at
		}
	}
	deadline := time.Now().Add(c.limit)
	for {
		if err := admin.QueryRow(ctx, `SELECT count(*) FROM batchclaim.batches WHERE state = 'COMMITTED'`).Scan(&r.Committed); err != nil {
			stopProbes()
			wg.Wait()
			return r, err
		}
		if r.Committed == r.Batches || time.Now().After(deadline) {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(250 * time.Millisecond):
		}
		if ctx.Err() != nil {
			stopProbes()
			wg.Wait()
			return r, ctx.Err()
		}
	}
	stopProbes()
	wg.Wait()
	for _, z := range r.Readyz {
		r.ReadyzNon200 += z.Non200
		r.ReadyzFailed += z.Failed
	}
	if r.Committed < r.Batches {
		return r, fmt.Errorf("%d of %d batches committed after %s (logs in %s)", r.Committed, r.Batches, c.limit, logDir)
	}
	after, err := scrapeAll(ctx, f.kids)
	if err != nil {
		return r, err
	}
	var stmts float64
	for i := range f.kids {
		stmts += after[i].metrics["batchclaim_db_statements_total"] - before[i].metrics["batchclaim_db_statements_total"]
	}
	r.StatementsPer = round3(stmts / float64(r.Batches))
	var secs float64
	var ages []float64
	if err := admin.QueryRow(ctx, `SELECT EXTRACT(EPOCH FROM max(updated_at) - $1::timestamptz)::float8 FROM batchclaim.batches`, start).Scan(&secs); err != nil {
		return r, err
	}
	rows, err := admin.Query(ctx, `SELECT (EXTRACT(EPOCH FROM updated_at - created_at) * 1000)::float8 FROM batchclaim.batches`)
	if err != nil {
		return r, err
	}
	if ages, err = pgx.CollectRows(rows, pgx.RowTo[float64]); err != nil {
		return r, err
	}
	r.Seconds = round3(secs)
	r.BatchesPerSecond = round3(float64(r.Batches) / secs)
	r.P50Ms, r.P99Ms, _ = quantiles(ages)
	f.stopAll()
	if !c.keep {
		_ = os.RemoveAll(logDir)
	}
	return r, nil
}

// probeReadyz GETs url every interval until ctx ends, each probe with a 1s timeout (a
// Kubernetes probe's default), and counts the answers.
func probeReadyz(ctx context.Context, url string, every time.Duration) readyzCount {
	z := readyzCount{ByCode: map[string]int{}}
	client := &http.Client{Timeout: time.Second}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return z
		case <-t.C:
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			z.Failed++
			continue
		}
		resp, err := client.Do(req)
		if ctx.Err() != nil {
			return z
		}
		z.Probes++
		if err != nil {
			z.Failed++
			continue
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		z.ByCode[fmt.Sprint(resp.StatusCode)]++
		if resp.StatusCode != http.StatusOK {
			z.Non200++
		}
	}
}
