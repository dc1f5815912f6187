package node

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/batchclaim/batchclaim/httpguard"
	"github.com/batchclaim/batchclaim/ingest"
	"github.com/batchclaim/batchclaim/submitter"
	"github.com/batchclaim/batchclaim/ui"
)

// Listener limits applied to zero Config fields.
const (
	ReadTimeoutDefault       = httpguard.ReadTimeoutDefault
	ReadHeaderTimeoutDefault = httpguard.ReadHeaderTimeoutDefault
	MaxHeaderBytesDefault    = httpguard.MaxHeaderBytesDefault
	MaxIngestRequestsDefault = 64
	MaxConnectionsDefault    = httpguard.MaxConnectionsDefault
	// IdleTimeout closes keep-alive connections idle this long.
	IdleTimeout = httpguard.IdleTimeoutDefault
	// httpShutdownTimeout bounds the HTTP server's graceful shutdown at the end of a stop.
	httpShutdownTimeout = 2 * time.Second
)

// validate checks c once defaulted (withDefaults): the listener's settings.
func (c Config) validate() error {
	var errs []error
	if (c.TLSCertFile == "") != (c.TLSKeyFile == "") {
		errs = append(errs, errors.New("a TLS certificate and key go together: set both or neither"))
	}
	if c.ReadTimeout < 0 || c.ReadHeaderTimeout < 0 {
		errs = append(errs, fmt.Errorf("read timeouts must not be negative, got %s and %s", c.ReadTimeout, c.ReadHeaderTimeout))
	}
	if c.MaxHeaderBytes < 0 || c.MaxIngestRequests < 0 || c.MaxBody < 0 || c.MaxIngestMemory < 0 || c.MaxConnections < 0 {
		errs = append(errs, fmt.Errorf("listener limits must not be negative, got max header bytes %d, max ingest requests %d, max body %d, max ingest memory %d, max connections %d",
			c.MaxHeaderBytes, c.MaxIngestRequests, c.MaxBody, c.MaxIngestMemory, c.MaxConnections))
	} else if _, err := c.ingestConfig(1).Resolve(); err != nil {
		errs = append(errs, fmt.Errorf("ingest: %w", err))
	}
	if c.Pprof && c.Listen == "" {
		errs = append(errs, errors.New("pprof is served on the listener: set Listen too"))
	} else if c.Pprof && c.Auth == nil && !httpguard.LoopbackOnly(c.Listen) {
		errs = append(errs, fmt.Errorf("pprof on %s, not a loopback address, needs Auth: profiles show the process's memory and code to whoever can reach it", c.Listen))
	}
	if _, err := httpguard.NewHosts(c.Listen, c.AllowedHosts); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return fmt.Errorf("node: %w", errors.Join(errs...))
	}
	return nil
}

// ingestConfig is the ingest API's configuration; it may hold conns connections at once.
func (c Config) ingestConfig(conns int) ingest.Config {
	return ingest.Config{MaxBody: c.MaxBody, MaxMemory: c.MaxIngestMemory, MaxRequests: cmp.Or(c.MaxIngestRequests, MaxIngestRequestsDefault),
		MaxConns: conns, Logger: c.Logger}
}

// IngestConns is how many connections of a pool of maxConns the ingest API may hold at once:
// half of them (at least one), so that the workers, the queuer and the poller always have
// the rest.
func IngestConns(maxConns int32) int { return max(1, int(maxConns)/2) }

// Terms of MemoryBound.
const (
	// MemoryBase is what an idle instance holds: the runtime, the pools' connections and
	// statement caches, the metrics (about 24 MiB measured, rounded up).
	MemoryBase = 32 << 20
	// connOverhead is what one open connection holds besides its headers: its goroutine's
	// stack and its read and write buffers.
	connOverhead = 16 << 10
	// workerOverhead is what one submission in flight holds besides its payload: its
	// goroutine, and on the ledger path its HTTP connection's two goroutines and buffers (43
	// KiB measured with TLS, 30 without; an idle kept connection 36 and 23).
	workerOverhead = 48 << 10
)

// MemoryBound is the most memory an instance with this configuration, on a pool of
// poolConns connections, holds live in the worst case (docs/operations.md, "Memory"):
//
//	MemoryBase
//	+ MaxIngestMemory                      request bodies and their decoded batches
//	+ IngestConns x 2 x max(MaxBody, 2 MiB)   the driver's copies of what each storing request sends (ingest.StoreMemory)
//	+ max(MaxSubmitMemory, MaxBody) + MaxBody   the payloads of submissions in flight, and those read
//	+ (MaxConnections + 16) x (MaxHeaderBytes + 16 KiB)   connections (and the probes' reserve), their headers being read
//	+ Workers x 48 KiB                     submissions in flight: goroutines, ledger connections
//
// A batch is never larger than the body it came in. The garbage collector lets the heap grow
// to twice what is live before it collects (GOGC=100), unless a soft memory limit
// (debug.SetMemoryLimit, GOMEMLIMIT) makes it collect sooner; `run` sets one above this bound.
func (c Config) MemoryBound(poolConns int32) int64 {
	body := cmp.Or(c.MaxBody, ingest.MaxBodyDefault)
	inflight := max(cmp.Or(c.MaxSubmitMemory, submitter.MaxMemoryDefault), body)
	conns := int64(cmp.Or(c.MaxConnections, MaxConnectionsDefault) + httpguard.ProbeConnections)
	header := int64(cmp.Or(c.MaxHeaderBytes, MaxHeaderBytesDefault))
	workers := int64(cmp.Or(c.Workers, submitter.WorkersDefault))
	return MemoryBase + cmp.Or(c.MaxIngestMemory, ingest.MaxMemoryDefault) + int64(IngestConns(poolConns))*ingest.StoreMemory(body) +
		inflight + body + conns*(header+connOverhead) + workers*workerOverhead
}

// ProbeConns is the size of the listener's own small pool, dialled with the node's pool's
// configuration, on which the scrape-time metrics and the status page read: they never wait
// behind ingest or the workers for a connection of the node's pool. /readyz reads what the
// readiness pings recorded, on a connection of their own (ReadinessConns).
const ProbeConns = 2

// openPaths are served under any Host name (load balancers and scrapers may use any).
var openPaths = []string{"/healthz", "/readyz", "/metrics"}

func (n *Node) listen(ctx context.Context) (*http.Server, error) {
	if n.cfg.Listen == "" {
		return nil, nil
	}
	var tlsCfg *tls.Config
	if n.cfg.TLSCertFile != "" {
		cert, err := tls.LoadX509KeyPair(n.cfg.TLSCertFile, n.cfg.TLSKeyFile)
		if err != nil {
			return nil, fmt.Errorf("load TLS certificate %s and key %s: %w", n.cfg.TLSCertFile, n.cfg.TLSKeyFile, err)
		}
		tlsCfg = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	pc := n.db.Pool().Config()
	icfg := n.cfg.ingestConfig(IngestConns(pc.MaxConns))
	icfg.OnStored = func(k int) { n.metrics.ingested.Add(float64(k)) }
	api, err := ingest.NewHandler(n.db, icfg)
	if err != nil {
		return nil, err
	}
	prober, err := newDBProber(ctx, n.db.Pool().Config(), n.log)
	if err != nil {
		return nil, err
	}
	pc.MaxConns, pc.MinConns, pc.MinIdleConns = ProbeConns, 0, 0
	probe, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		prober.pool.Close()
		return nil, fmt.Errorf("probe pool: %w", err)
	}
	closePools := func() { probe.Close(); prober.pool.Close() }
	page, err := ui.New(n.db.WithPool(probe), ui.Config{Logger: n.log})
	if err != nil {
		closePools()
		return nil, err
	}
	registerIngestMetrics(n.registry, api)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.HandleFunc("GET /readyz", n.ready(prober))
	mux.Handle("GET /metrics", promhttp.HandlerFor(n.registry, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}))
	api.Register(mux)
	page.Register(mux) // the status page at /, its assets and its JSON API under /api/
	if n.cfg.Pprof {
		registerPprof(mux) // not among httpauth.Open's paths: Auth asks a token for it
	}
	var handler http.Handler = mux
	if n.cfg.Auth != nil {
		handler = n.cfg.Auth(mux)
	}
	srv, ln, err := httpguard.Listen(httpguard.Config{Addr: n.cfg.Listen, Handler: handler, AllowedHosts: n.cfg.AllowedHosts,
		OpenPaths: openPaths, CostlyGETs: []string{"/debug/pprof"}, TLSConfig: tlsCfg, ReadTimeout: n.cfg.ReadTimeout, ReadHeaderTimeout: n.cfg.ReadHeaderTimeout,
		MaxHeaderBytes: n.cfg.MaxHeaderBytes, MaxConnections: n.cfg.MaxConnections, Logger: n.log})
	if err != nil {
		closePools()
		return nil, err
	}
	n.metrics.states.probe.Store(probe)
	n.metrics.readiness.Store(prober.pool)
	srv.BaseContext = func(net.Listener) context.Context { return context.WithoutCancel(ctx) }
	pctx, stopProber := context.WithCancel(context.WithoutCancel(ctx)) // ready until the listener stops
	proberDone := make(chan struct{})
	go func() { defer close(proberDone); prober.run(pctx) }()
	srv.RegisterOnShutdown(func() {
		stopProber()
		<-proberDone
		n.metrics.states.probe.Store(nil)
		n.metrics.readiness.Store(nil)
		closePools() // waits for the requests still using them
	})
	n.mu.Lock()
	n.addr = ln.Addr().String()
	n.mu.Unlock()
	n.log.Info("listening", "addr", n.addr, "tls", tlsCfg != nil, "auth", n.cfg.Auth != nil,
		"ingest_conns", IngestConns(n.db.Pool().Config().MaxConns), "probe_conns", ProbeConns, "readiness_conns", ReadinessConns)
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			n.log.Error("http server", "error", err)
		}
	}()
	return srv, nil
}

// CodeBusy is the error code of the 503 answered when the ingest API is at one of its limits
// (Config.MaxIngestRequests, MaxIngestMemory).
const CodeBusy = ingest.CodeBusy

// ready answers 200 while the database answers the listener's readiness pings (dbProber,
// on its own pool, apart from the work's) and the instance is registered with a live lease.
// It reads what the pings recorded: a probe costs no database round trip. A failure names no
// database, user or host.
func (n *Node) ready(p *dbProber) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := p.ready(); err != nil {
			httpguard.Logger(r.Context(), n.log).Debug("readiness: the database does not answer", "error", err)
			http.Error(w, "database unreachable", http.StatusServiceUnavailable)
			return
		}
		if !n.engine.Healthy() {
			http.Error(w, "not registered or fenced (no recent lease renewal)", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ready\n"))
	}
}

// registerIngestMetrics exports what the ingest API holds, read at scrape time.
func registerIngestMetrics(reg *prometheus.Registry, api *ingest.Handler) {
	for _, c := range []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "batchclaim_ingest_memory_bytes",
			Help: "Bytes the ingest API holds for request bodies and their decoded batches (bounded by --max-ingest-memory)."},
			func() float64 { m, _ := api.Stats(); return float64(m) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "batchclaim_ingest_requests_in_progress",
			Help: "Ingest requests being worked on, their body in (bounded by --max-ingest-requests)."},
			func() float64 { _, r := api.Stats(); return float64(r) }),
	} {
		if err := reg.Register(c); err != nil && !errors.As(err, new(prometheus.AlreadyRegisteredError)) {
			panic(err)
		}
	}
}
