package node

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/claims"
	"github.com/batchclaim/batchclaim/internal/db"
	"github.com/batchclaim/batchclaim/observer"
	"github.com/batchclaim/batchclaim/pgdb"
	"github.com/batchclaim/batchclaim/submitter"
)

// metrics are the instance's Prometheus metrics.
type metrics struct {
	submitLatency *prometheus.HistogramVec
	commitLatency prometheus.Histogram
	responses     *prometheus.CounterVec
	transitions   *prometheus.CounterVec
	ingested      prometheus.Counter
	states        *batchStates
	readiness     atomic.Pointer[pgxpool.Pool] // the readiness pings' pool while the listener runs

	// The children of submitLatency by verdict and of responses by HTTP status, looked up
	// once each: measure runs for every job, and a lookup through the vector formats and
	// hashes the label and takes the vector's lock.
	latencyByVerdict sync.Map // batchclaim.Verdict -> prometheus.Observer
	responsesByCode  sync.Map // int -> prometheus.Counter
}

// child returns the child of a metric vector for key k, from cache, creating it with with
// and caching it at its first use: the children a process uses are few (the verdicts, the
// HTTP statuses its ledger answers with).
func child[K comparable, M any](cache *sync.Map, k K, with func(K) M) M {
	if c, ok := cache.Load(k); ok {
		return c.(M)
	}
	c, _ := cache.LoadOrStore(k, with(k))
	return c.(M)
}

// newMetrics makes the instance's own metrics, reading the batches through pool; register
// adds them to a registry.
func newMetrics(pool pgdb.Querier) *metrics {
	return &metrics{
		states: &batchStates{pool: pool},
		submitLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "batchclaim_submit_latency_seconds", Help: "Duration of one submission (POST) by verdict.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 14),
		}, []string{"verdict"}),
		commitLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "batchclaim_commit_latency_seconds", Help: "Time from a batch being stored to it being recorded COMMITTED.",
			Buckets: prometheus.ExponentialBuckets(0.05, 2, 14),
		}),
		responses: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "batchclaim_dlt_responses_total", Help: "Ledger answers to submissions by HTTP status code (0: no answer).",
		}, []string{"code"}),
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "batchclaim_batch_transitions_total", Help: "Batch state changes recorded by this instance.",
		}, []string{"to"}),
		ingested: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "batchclaim_batches_ingested_total", Help: "New batches stored through the ingest API.",
		}),
	}
}

// register adds m to reg, with the claim engine's metrics (ClaimMetrics), the submissions
// running (busy) and the retention job's counters (retain, nil when retention is off).
func (m *metrics) register(reg prometheus.Registerer, eng *claims.Engine, busy func() int, retain *observer.Retention) {
	retention := func() observer.RetentionStats {
		if retain == nil {
			return observer.RetentionStats{}
		}
		return retain.Stats()
	}
	reg.MustRegister(ClaimMetrics(eng)...)
	reg.MustRegister(m.submitLatency, m.commitLatency, m.responses, m.transitions, m.ingested,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "batchclaim_submissions_in_flight", Help: "Submitter calls running now (an outcome being written holds no worker)."},
			func() float64 { return float64(busy()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "batchclaim_batches_pruned_total", Help: "Finished batches this instance deleted (retention)."},
			func() float64 { return float64(retention().Pruned) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "batchclaim_retention_last_run_timestamp_seconds",
			Help: "Database time of this instance's last retention run that got to work (0: none)."},
			func() float64 {
				if at := retention().LastRun; !at.IsZero() {
					return float64(at.UnixNano()) / 1e9
				}
				return 0
			}),
		m.states,
	)
}

// ClaimMetrics are the claim engine's metrics (claims held, gained, lost, cycles and their
// duration, retries, fencings), read from eng.Stats() at each scrape. A node registers them
// itself; a process that runs a claim engine without a node (run --claims-only, or a service
// that embeds the engine) registers these.
func ClaimMetrics(eng *claims.Engine) []prometheus.Collector {
	stat := func(name, help string, f func(claims.Stats) int64, counter bool) prometheus.Collector {
		fn := func() float64 { return float64(f(eng.Stats())) }
		if counter {
			return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, fn)
		}
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, fn)
	}
	return []prometheus.Collector{
		stat("batchclaim_claims_held", "Claims this instance holds.", func(s claims.Stats) int64 { return s.Held }, false),
		stat("batchclaim_claims_yielding", "Claims over this instance's fair share being given back: no new job starts on them, each is released once its running job ends.", func(s claims.Stats) int64 { return s.Yielding }, false),
		stat("batchclaim_claims_gained_total", "Claims gained.", func(s claims.Stats) int64 { return s.Gained }, true),
		stat("batchclaim_claims_lost_total", "Claims lost (taken, fenced, deadline, released, dropped).", func(s claims.Stats) int64 { return s.Lost }, true),
		stat("batchclaim_takeovers_total", "Claims of expired instances this instance freed.", func(s claims.Stats) int64 { return s.Voided }, true),
		stat("batchclaim_claim_rows_dropped_total", "Idle claim rows this instance deleted (--drop-idle-after).", func(s claims.Stats) int64 { return s.Dropped }, true),
		stat("batchclaim_claim_cycles_total", "Claim cycles run.", func(s claims.Stats) int64 { return s.Cycles }, true),
		stat("batchclaim_claim_cycle_errors_total", "Claim cycles that failed.", func(s claims.Stats) int64 { return s.CycleErrors }, true),
		stat("batchclaim_serialization_retries_total", "Claim-cycle statements run again after a transient conflict (SQLSTATE 40001, 40P01, 55P03).", func(s claims.Stats) int64 { return s.SerializationRetries }, true),
		stat("batchclaim_serialization_give_ups_total", "Claim cycles that failed after all retries of a transient conflict.", func(s claims.Stats) int64 { return s.SerializationGiveUps }, true),
		stat("batchclaim_stale_writes_rejected_total", "Fenced writes refused because the epoch was stale.", func(s claims.Stats) int64 { return s.StaleWritesRejected }, true),
		stat("batchclaim_deadline_fences_total", "Times the local deadline passed without a renewal.", func(s claims.Stats) int64 { return s.DeadlineFences }, true),
		stat("batchclaim_stalls_total", "Times lease renewal stopped because the instance's work did not move (no fetch round or claim-cycle survey answered through the pool, or a job past its deadline, for 2 x Expiry1).", func(s claims.Stats) int64 { return s.Stalls }, true),
		cycleHistogram{eng: eng, desc: prometheus.NewDesc("batchclaim_claim_cycle_duration_seconds",
			"Duration of one claim cycle (survey, then any void, acquire, release or drop), failed ones included.", nil, nil)},
	}
}

// cycleHistogram exports the engine's cycle-duration histogram.
type cycleHistogram struct {
	eng  *claims.Engine
	desc *prometheus.Desc
}

func (c cycleHistogram) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c cycleHistogram) Collect(ch chan<- prometheus.Metric) {
	h := c.eng.Stats().CycleSeconds
	buckets := make(map[float64]uint64, len(h.Bounds))
	for i, b := range h.Bounds {
		buckets[b] = h.Counts[i]
	}
	ch <- prometheus.MustNewConstHistogram(c.desc, h.Count, h.Sum, buckets)
}

// measure is the node's middleware around every job: its duration by verdict and its HTTP
// status.
func (m *metrics) measure(ctx context.Context, _ submitter.Job, next func(context.Context) (batchclaim.Result, error)) (batchclaim.Result, error) {
	start := time.Now()
	r, err := next(ctx)
	child(&m.latencyByVerdict, r.Verdict, func(v batchclaim.Verdict) prometheus.Observer {
		return m.submitLatency.WithLabelValues(v.String())
	}).Observe(time.Since(start).Seconds())
	child(&m.responsesByCode, r.HTTPStatus, func(code int) prometheus.Counter {
		return m.responses.WithLabelValues(strconv.Itoa(code))
	}).Inc()
	return r, err
}

// transition counts a batch's state change, and for a commit the time since it was stored.
func (m *metrics) transition(t observer.Transition) {
	m.transitions.WithLabelValues(string(t.To)).Inc()
	if t.To == batchclaim.StateCommitted {
		m.commitLatency.Observe(t.AgeSeconds)
	}
}

// batchStates reports unfinished batches by state, read from the database at scrape time
// through the partial index over open batches: a scrape costs O(open batches), however many
// finished ones the table holds. Finished batches (COMMITTED, INVALID) are counted by
// batchclaim_batch_transitions_total{to} instead.
type batchStates struct {
	pool  pgdb.Querier
	probe atomic.Pointer[pgxpool.Pool]    // the listener's own pool, read instead of pool while set
	ctx   atomic.Pointer[context.Context] // the node's run context; nothing is read before Run
}

var batchesDesc = prometheus.NewDesc("batchclaim_batches",
	"Unfinished batches in the database by state (all instances); finished ones are counted by batchclaim_batch_transitions_total.",
	[]string{"state"}, nil)

var oldestDesc = prometheus.NewDesc("batchclaim_oldest_unfinished_batch_seconds",
	"Age (database clock) of the oldest unfinished batch of any service_id; 0 when none is unfinished.", nil, nil)

var readableDesc = prometheus.NewDesc("batchclaim_database_readable",
	"1 if this scrape read the open batches from the database, 0 if the read failed (the batch gauges are then missing).", nil, nil)

func (b *batchStates) Describe(ch chan<- *prometheus.Desc) {
	ch <- batchesDesc
	ch <- oldestDesc
	ch <- readableDesc
}

func (b *batchStates) Collect(ch chan<- prometheus.Metric) {
	base := b.ctx.Load()
	if base == nil {
		return
	}
	ctx, cancel := context.WithTimeout(*base, 2*time.Second)
	defer cancel()
	var q pgdb.Querier = b.pool
	if p := b.probe.Load(); p != nil {
		q = pgdb.QuerierInSchema(p, pgdb.SchemaOf(b.pool))
	}
	rows, err := db.New().BatchOpenStateTotals(ctx, q)
	if err != nil {
		// The other series (the claim engine's counters above all, whose alerts matter most
		// while the database is away) are still served; this one says the read failed. The
		// error itself names the database and is not exported.
		ch <- prometheus.MustNewConstMetric(readableDesc, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(readableDesc, prometheus.GaugeValue, 1)
	counts := map[string]int64{}
	var oldest float64
	for _, r := range rows {
		counts[r.State] = r.Batches
		oldest = max(oldest, r.OldestSeconds)
	}
	ch <- prometheus.MustNewConstMetric(oldestDesc, prometheus.GaugeValue, oldest)
	for _, s := range batchclaim.States {
		if s.Terminal() {
			continue
		}
		ch <- prometheus.MustNewConstMetric(batchesDesc, prometheus.GaugeValue, float64(counts[string(s)]), string(s))
	}
}
