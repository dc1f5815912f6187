package node

import (
	"cmp"
	"io"
	"net/http"
	"net/http/pprof"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/batchclaim/batchclaim/httpguard"
)

// buildInfo is batchclaim_build_info: one series of value 1 whose labels say what runs.
// version is the one the instance registers (claims.Config.Version, which `run` sets to what
// `batchclaim version` prints), else the main module's version; revision is the commit the
// build recorded (empty without one); goversion is the Go release it was built with.
func buildInfo(version string) prometheus.Collector {
	revision := ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		version = cmp.Or(version, bi.Main.Version)
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				revision = s.Value
			}
		}
	}
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "batchclaim_build_info",
		Help: "Always 1; the labels give the version the instance registers, the commit it was built from and the Go release.",
		ConstLabels: prometheus.Labels{
			"version": cmp.Or(version, "unknown"), "revision": revision, "goversion": runtime.Version(),
		},
	}, func() float64 { return 1 })
}

// poolStats exports the statistics of the node's pool (pool="node") and, while the listener
// runs, of its probe pool (pool="probe") and readiness pool (pool="readiness"), read at each
// scrape.
type poolStats struct {
	node      *pgxpool.Pool
	probe     func() *pgxpool.Pool // nil result: no probe pool now
	readiness func() *pgxpool.Pool // nil result: no readiness pool now
}

var (
	poolLabels   = []string{"pool"}
	poolAcquired = prometheus.NewDesc("batchclaim_pool_acquired_conns",
		"Connections of the pool in use now.", poolLabels, nil)
	poolIdle = prometheus.NewDesc("batchclaim_pool_idle_conns",
		"Idle connections of the pool.", poolLabels, nil)
	poolTotal = prometheus.NewDesc("batchclaim_pool_total_conns",
		"Open connections of the pool (acquired, idle and being opened).", poolLabels, nil)
	poolMax = prometheus.NewDesc("batchclaim_pool_max_conns",
		"Most connections the pool opens (--db-max-conns for pool=\"node\").", poolLabels, nil)
	poolAcquires = prometheus.NewDesc("batchclaim_pool_acquires_total",
		"Connections acquired from the pool.", poolLabels, nil)
	poolAcquireWait = prometheus.NewDesc("batchclaim_pool_acquire_wait_seconds_total",
		"Time spent acquiring connections from the pool, summed over all acquires.", poolLabels, nil)
	poolEmptyAcquires = prometheus.NewDesc("batchclaim_pool_empty_acquires_total",
		"Acquires that found no idle connection and waited for one to be opened or released.", poolLabels, nil)
	poolCanceledAcquires = prometheus.NewDesc("batchclaim_pool_canceled_acquires_total",
		"Acquires given up because their context ended first.", poolLabels, nil)
)

func (p poolStats) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{poolAcquired, poolIdle, poolTotal, poolMax, poolAcquires,
		poolAcquireWait, poolEmptyAcquires, poolCanceledAcquires} {
		ch <- d
	}
}

func (p poolStats) Collect(ch chan<- prometheus.Metric) {
	collectPool(ch, "node", p.node)
	if probe := p.probe(); probe != nil {
		collectPool(ch, "probe", probe)
	}
	if r := p.readiness(); r != nil {
		collectPool(ch, "readiness", r)
	}
}

func collectPool(ch chan<- prometheus.Metric, name string, pool *pgxpool.Pool) {
	s := pool.Stat()
	gauge := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, name)
	}
	counter := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, name)
	}
	gauge(poolAcquired, float64(s.AcquiredConns()))
	gauge(poolIdle, float64(s.IdleConns()))
	gauge(poolTotal, float64(s.TotalConns()))
	gauge(poolMax, float64(s.MaxConns()))
	counter(poolAcquires, float64(s.AcquireCount()))
	counter(poolAcquireWait, s.AcquireDuration().Seconds())
	counter(poolEmptyAcquires, float64(s.EmptyAcquireCount()))
	counter(poolCanceledAcquires, float64(s.CanceledAcquireCount()))
}

// pprofSecondsMax bounds the seconds a CPU profile, an execution trace or a delta profile may
// run (?seconds=; 400 beyond): twice the CPU profile's default of 30s.
const pprofSecondsMax = 60 * time.Second

// registerPprof serves the runtime's profiles under /debug/pprof/ (Config.Pprof). The
// command line is served with every value masked (redactedCmdline): a flag may hold a secret.
// The handlers that run for ?seconds= get that long beyond the listener's write timeout, up to
// pprofSecondsMax (httpguard.LimitSeconds): net/http/pprof bounds nothing itself.
func registerPprof(mux *http.ServeMux) {
	seconds := func(h http.HandlerFunc) http.Handler { return httpguard.LimitSeconds(pprofSecondsMax, h) }
	mux.Handle("GET /debug/pprof/", seconds(pprof.Index)) // the named profiles: heap, goroutine, block, ... (?seconds= for a delta)
	mux.HandleFunc("GET /debug/pprof/cmdline", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, redactedCmdline(os.Args))
	})
	mux.Handle("GET /debug/pprof/profile", seconds(pprof.Profile))
	mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("POST /debug/pprof/symbol", pprof.Symbol)
	mux.Handle("GET /debug/pprof/trace", seconds(pprof.Trace))
}

// redactedCmdline is the process's command line as /debug/pprof/cmdline shows it: the program,
// its first word (a subcommand) and the flags' names, every value masked, so that a secret
// given as a flag (a password in a database URL, a ledger credential) is never served. Words
// are separated by NUL bytes, as net/http/pprof's are.
func redactedCmdline(args []string) string {
	out := make([]string, 0, len(args))
	for i, a := range args {
		switch {
		case i == 0, i == 1 && !strings.HasPrefix(a, "-"):
			out = append(out, a)
		case strings.HasPrefix(a, "-") && a != "-":
			name, _, hasValue := strings.Cut(a, "=")
			if hasValue {
				name += "=xxxxx"
			}
			out = append(out, name)
		default:
			out = append(out, "xxxxx")
		}
	}
	return strings.Join(out, "\x00")
}
