package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/batchclaim/batchclaim/claims"
	"github.com/batchclaim/batchclaim/cmd/batchclaim/internal/database"
)

// scaleConfig is the shape of a scale run.
type scaleConfig struct {
	serviceIDs, processes   int
	renew, expiry1, expiry2 time.Duration
	intervals               int           // renew intervals of the idle window
	limit                   time.Duration // give up when not balanced by then
	keep                    bool
}

// cycleMeasured says how the scale scenario's cycle latency is read.
const cycleMeasured = "from batchclaim_claim_cycle_duration_seconds of every process, summed, as histogram_quantile " +
	"does it: linear within the bucket (bounds 1, 2.5, 5, 10, 25, 50, 100, 250, 500 ms, 1 s ...), so a figure is " +
	"no finer than its bucket"

// scaleResult is the scale scenario's JSON line.
type scaleResult struct {
	Scenario   string `json:"scenario"`
	Processes  int    `json:"processes"`
	ServiceIDs int    `json:"service_ids"`
	RenewMs    int64  `json:"renew_interval_ms"`
	Expiry1Ms  int64  `json:"expiry_1_ms"`
	Expiry2Ms  int64  `json:"expiry_2_ms"`
	// From the first process's start until no claim was free and the counts held by live
	// instances differed by at most one.
	SecondsToBalance float64 `json:"seconds_to_balance"`
	HeldMin          int     `json:"held_min"`
	HeldMax          int     `json:"held_max"`
	// batchclaim_deadline_fences_total summed over the processes, at the end.
	SelfFencings int64 `json:"self_fencings"`
	// Claim-cycle duration of all processes: p99 over the whole run (balancing included),
	// and p50 and p99 over the idle window; CycleNote says how they are read.
	CycleP99Ms     float64 `json:"cycle_ms_p99"`
	IdleCycleP50Ms float64 `json:"idle_cycle_ms_p50"`
	IdleCycleP99Ms float64 `json:"idle_cycle_ms_p99"`
	CycleNote      string  `json:"cycle_ms_note"`
	// batchclaim_db_statements_total over the idle window, per process per renew interval.
	IdleStatements    float64 `json:"idle_statements_per_instance_per_interval"`
	IdleStatementsMax float64 `json:"idle_statements_per_instance_per_interval_max"`
	IdleSeconds       float64 `json:"idle_window_seconds"`
	StillBalanced     bool    `json:"still_balanced"`
	RSSMeanMiB        float64 `json:"rss_mib_per_instance_mean"`
	RSSMaxMiB         float64 `json:"rss_mib_per_instance_max"`
	ConnsPerInstance  float64 `json:"db_connections_per_instance"`
	Cycles            int64   `json:"claim_cycles"`
	CycleErrors       int64   `json:"claim_cycle_errors"`
	Retries           int64   `json:"serialization_retries"`
	GiveUps           int64   `json:"serialization_give_ups"`
}

func (r scaleResult) print(w io.Writer) {
	fmt.Fprintf(w, "scale: %d `batchclaim run --claims-only` processes started together over %d service_ids; R %s, T1 %s, T2 %s\n",
		r.Processes, r.ServiceIDs, time.Duration(r.RenewMs)*time.Millisecond, time.Duration(r.Expiry1Ms)*time.Millisecond, time.Duration(r.Expiry2Ms)*time.Millisecond)
	fmt.Fprintf(w, "  balanced after        %8.1f s  (no claim free, %d to %d claims per instance)\n", r.SecondsToBalance, r.HeldMin, r.HeldMax)
	fmt.Fprintf(w, "  self-fencings         %8d    (batchclaim_deadline_fences_total, all processes)\n", r.SelfFencings)
	fmt.Fprintf(w, "  cycle p99             %8.1f ms over the whole run; idle p50 %.1f ms, p99 %.1f ms\n", r.CycleP99Ms, r.IdleCycleP50Ms, r.IdleCycleP99Ms)
	fmt.Fprintf(w, "                                 (%s)\n", r.CycleNote)
	fmt.Fprintf(w, "  idle statements       %8.2f    per instance per renew interval (max %.2f), over %.1f s once balanced%s\n",
		r.IdleStatements, r.IdleStatementsMax, r.IdleSeconds, map[bool]string{true: "", false: "; NOT balanced at the end"}[r.StillBalanced])
	fmt.Fprintf(w, "  resident memory       %8.1f MiB per instance (max %.1f)\n", r.RSSMeanMiB, r.RSSMaxMiB)
	fmt.Fprintf(w, "  database connections  %8.2f    per instance\n", r.ConnsPerInstance)
	fmt.Fprintf(w, "  claim cycles %d, failed %d, serialization retries %d, give-ups %d\n\n", r.Cycles, r.CycleErrors, r.Retries, r.GiveUps)
}

// benchScale starts processes `run --claims-only` processes at once over serviceIDs
// service_ids and measures how fast they balance and what they cost once balanced.
func benchScale(ctx context.Context, c scaleConfig, info io.Writer) (scaleResult, error) {
	r := scaleResult{Scenario: "scale", Processes: c.processes, ServiceIDs: c.serviceIDs,
		RenewMs: c.renew.Milliseconds(), Expiry1Ms: c.expiry1.Milliseconds(), Expiry2Ms: c.expiry2.Milliseconds(), CycleNote: cycleMeasured}
	if _, err := (claims.Config{RenewInterval: c.renew, Expiry1: c.expiry1, Expiry2: c.expiry2,
		KnobNames: map[string]string{"RenewInterval": "--scale-renew-interval", "Expiry1": "--scale-expiry-1", "Expiry2": "--scale-expiry-2"}}).Resolve(); err != nil {
		return r, err
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	db, err := database.NewScratch(ctx, "batchclaim_bench_scale", c.keep, info, logger)
	if err != nil {
		return r, err
	}
	defer db.Close(ctx)
	admin, err := database.Open(ctx, db.URL, 1)
	if err != nil {
		return r, err
	}
	defer admin.Close()
	const chunk = 10000
	ids := make([]string, 0, chunk)
	for i := range c.serviceIDs {
		ids = append(ids, fmt.Sprintf("sc-%07d", i))
		if len(ids) == chunk || i == c.serviceIDs-1 {
			if err := claims.RegisterServiceIDs(ctx, admin, ids...); err != nil {
				return r, err
			}
			ids = ids[:0]
		}
	}
	logDir, err := os.MkdirTemp("", "batchclaim-bench-scale-")
	if err != nil {
		return r, err
	}
	fmt.Fprintf(info, "scale: %d service_ids registered; instance logs in %s\n", c.serviceIDs, logDir)
	f := &fleet{admin: admin, logDir: logDir, prefix: "sc", k: c.serviceIDs, listen: true, args: func(name, listen string) []string {
		return []string{"run", "--claims-only", "--database-url", db.URL, "--instance-name", name, "--listen", listen,
			"--log-level", "info", "--log-format", "json", "--renew-interval", c.renew.String(), "--expiry-1", c.expiry1.String(), "--expiry-2", c.expiry2.String()}
	}}
	defer f.stopAll()
	start := time.Now()
	for range c.processes {
		if err := f.start(); err != nil {
			return r, err
		}
	}
	// Poll the claims table until balanced.
	for {
		for _, k := range f.kids {
			if k.Exited() {
				return r, fmt.Errorf("%s exited (%v); see %s", k.Name, k.Err, logDir)
			}
		}
		if err := f.resolve(ctx); err != nil {
			return r, err
		}
		s, err := readSpread(ctx, admin)
		if err != nil {
			return r, err
		}
		if err := f.readAddrs(); err != nil {
			return r, err
		}
		if s.balanced(c.serviceIDs, f.kids) && f.allListening() {
			r.SecondsToBalance = round3(time.Since(start).Seconds())
			r.HeldMin, r.HeldMax = s.lo, s.hi
			break
		}
		if time.Since(start) > c.limit {
			return r, fmt.Errorf("not balanced after %s: %d of %d processes live, %d claims free, %d to %d per live instance (logs in %s)",
				c.limit, len(s.held), c.processes, s.free, s.lo, s.hi, logDir)
		}
		select {
		case <-ctx.Done():
			return r, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
	fmt.Fprintf(info, "scale: balanced after %.1fs; counting statements over %d renew intervals\n", r.SecondsToBalance, c.intervals)

	// The idle window: every process's statement counter before and after.
	before, err := scrapeAll(ctx, f.kids)
	if err != nil {
		return r, err
	}
	select {
	case <-ctx.Done():
		return r, ctx.Err()
	case <-time.After(time.Duration(c.intervals) * c.renew):
	}
	after, err := scrapeAll(ctx, f.kids)
	if err != nil {
		return r, err
	}
	var sum float64
	var whole, idle cycleHist
	for i := range f.kids {
		whole.add(after[i].cycles, 1)
		idle.add(after[i].cycles, 1)
		idle.add(before[i].cycles, -1)
		d := after[i].metrics["batchclaim_db_statements_total"] - before[i].metrics["batchclaim_db_statements_total"]
		per := d / (after[i].at.Sub(before[i].at).Seconds() / c.renew.Seconds())
		sum += per
		r.IdleStatementsMax = max(r.IdleStatementsMax, round3(per))
		r.IdleSeconds = max(r.IdleSeconds, round3(after[i].at.Sub(before[i].at).Seconds()))
		r.SelfFencings += int64(after[i].metrics["batchclaim_deadline_fences_total"])
		r.Cycles += int64(after[i].metrics["batchclaim_claim_cycles_total"])
		r.CycleErrors += int64(after[i].metrics["batchclaim_claim_cycle_errors_total"])
		r.Retries += int64(after[i].metrics["batchclaim_serialization_retries_total"])
		r.GiveUps += int64(after[i].metrics["batchclaim_serialization_give_ups_total"])
	}
	r.IdleStatements = round3(sum / float64(len(f.kids)))
	r.CycleP99Ms = round3(whole.quantile(0.99) * 1000)
	r.IdleCycleP50Ms, r.IdleCycleP99Ms = round3(idle.quantile(0.5)*1000), round3(idle.quantile(0.99)*1000)
	var rssSum float64
	for _, k := range f.kids {
		kib, err := vmRSS(k.Cmd.Process.Pid)
		if err != nil {
			return r, err
		}
		mib := kib / 1024
		rssSum += mib
		r.RSSMaxMiB = max(r.RSSMaxMiB, round3(mib))
	}
	r.RSSMeanMiB = round3(rssSum / float64(len(f.kids)))
	var conns int
	if err := admin.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`).Scan(&conns); err != nil {
		return r, err
	}
	r.ConnsPerInstance = round3(float64(conns) / float64(c.processes))
	s, err := readSpread(ctx, admin)
	if err != nil {
		return r, err
	}
	r.StillBalanced = s.balanced(c.serviceIDs, f.kids)
	f.stopAll()
	if !c.keep {
		_ = os.RemoveAll(logDir)
	}
	return r, nil
}

// scrape is one reading of a process's /metrics.
type scrape struct {
	at      time.Time
	metrics map[string]float64 // counters and gauges without labels, by name
	cycles  cycleHist          // batchclaim_claim_cycle_duration_seconds
}

// cycleHist is a cumulative histogram read from /metrics.
type cycleHist struct {
	bounds []float64
	counts []float64 // cumulative, per bound
	count  float64   // the +Inf bucket
}

// add adds sign times o (the same bounds) to h.
func (h *cycleHist) add(o cycleHist, sign float64) {
	if h.bounds == nil {
		h.bounds, h.counts = o.bounds, make([]float64, len(o.bounds))
	}
	for i := range min(len(h.counts), len(o.counts)) {
		h.counts[i] += sign * o.counts[i]
	}
	h.count += sign * o.count
}

// quantile estimates the q-quantile in seconds as Prometheus' histogram_quantile does:
// linearly within the bucket it falls in (the highest bound when it falls in +Inf).
func (h cycleHist) quantile(q float64) float64 {
	if h.count <= 0 || len(h.bounds) == 0 {
		return 0
	}
	rank := q * h.count
	lo, below := 0.0, 0.0
	for i, b := range h.bounds {
		if h.counts[i] >= rank {
			if h.counts[i] == below {
				return b
			}
			return lo + (b-lo)*(rank-below)/(h.counts[i]-below)
		}
		lo, below = b, h.counts[i]
	}
	return h.bounds[len(h.bounds)-1]
}

// scrapeAll reads every process's /metrics, at once.
func scrapeAll(ctx context.Context, kids []*fleetKid) ([]scrape, error) {
	out := make([]scrape, len(kids))
	errs := make([]error, len(kids))
	var wg sync.WaitGroup
	for i, k := range kids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i], errs[i] = scrapeMetrics(ctx, "http://"+k.listen+"/metrics")
			out[i].at = time.Now()
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("%s: %w", kids[i].Name, err)
		}
	}
	return out, nil
}

// scrapeMetrics reads a Prometheus text page: the counters and gauges without labels, and
// the claim-cycle histogram.
func scrapeMetrics(ctx context.Context, url string) (scrape, error) {
	var out scrape
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return out, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return out, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return out, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return out, fmt.Errorf("GET %s: %w", url, err)
	}
	out.metrics = map[string]float64{}
	for name, f := range families {
		for _, m := range f.GetMetric() {
			if len(m.GetLabel()) > 0 {
				continue
			}
			switch {
			case m.Counter != nil:
				out.metrics[name] = m.GetCounter().GetValue()
			case m.Gauge != nil:
				out.metrics[name] = m.GetGauge().GetValue()
			case m.Untyped != nil:
				out.metrics[name] = m.GetUntyped().GetValue()
			case m.Histogram != nil && name == "batchclaim_claim_cycle_duration_seconds":
				h := m.GetHistogram()
				for _, b := range h.GetBucket() {
					if math.IsInf(b.GetUpperBound(), 1) {
						continue
					}
					out.cycles.bounds = append(out.cycles.bounds, b.GetUpperBound())
					out.cycles.counts = append(out.cycles.counts, float64(b.GetCumulativeCount()))
				}
				out.cycles.count = float64(h.GetSampleCount())
			}
		}
	}
	return out, nil
}

// vmRSS reads a process's resident set size in KiB.
func vmRSS(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(rest)
			if len(f) >= 1 {
				return strconv.ParseFloat(f[0], 64)
			}
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
}
