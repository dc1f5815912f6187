package main

import (
	"context"
	"flag"
	"log/slog"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/batchclaim/batchclaim/claims"
	"github.com/batchclaim/batchclaim/httpguard"
	"github.com/batchclaim/batchclaim/node"
)

// stmtMetric counts every statement `run` sends to the database as the Prometheus counter
// batchclaim_db_statements_total: each query and exec (the BEGIN, COMMIT and ROLLBACK pgx
// sends as statements of their own included), each statement of a pgx.Batch, each COPY. It
// is a pgx tracer set on the pool's connection config, so every connection dialled from that
// config counts too: the pool's, and the lease loop's own connection (claims dials it from
// the pool's ConnConfig). A pool's pings (sent below the tracer) and the protocol-level
// prepares of the statement cache are not statements and are not counted.
type stmtMetric struct{ n prometheus.Counter }

func newStmtMetric() *stmtMetric {
	return &stmtMetric{n: prometheus.NewCounter(prometheus.CounterOpts{
		Name: "batchclaim_db_statements_total",
		Help: "Statements this instance sent to the database (queries, execs, BEGIN/COMMIT/ROLLBACK, batch statements, COPY), the lease renewals' included.",
	})}
}

// attach is a database.Open option: it sets the tracer on the pool's connections.
func (m *stmtMetric) attach(cfg *pgxpool.Config) { cfg.ConnConfig.Tracer = m }

func (m *stmtMetric) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	m.n.Inc()
	return ctx
}

func (m *stmtMetric) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (m *stmtMetric) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}

func (m *stmtMetric) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) { m.n.Inc() }

func (m *stmtMetric) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

func (m *stmtMetric) TraceCopyFromStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceCopyFromStartData) context.Context {
	m.n.Inc()
	return ctx
}

func (m *stmtMetric) TraceCopyFromEnd(context.Context, *pgx.Conn, pgx.TraceCopyFromEndData) {}

// runRegistry is the registry `run` serves on /metrics: the Go and process collectors (which
// the node adds only to a registry of its own making), the statement counter, and the node's
// metrics, which node.New registers on it.
func runRegistry() (*prometheus.Registry, *stmtMetric) {
	m := newStmtMetric()
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), m.n)
	return reg, m
}

// flagGiven reports whether a flag was set, on the command line or through its environment
// variable (cli.Parse sets those through the FlagSet too).
func flagGiven(fs *flag.FlagSet, name string) bool {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	return given
}

// serveClaimsOnly serves /healthz and /metrics for `run --claims-only` on addr (nothing when
// addr is empty): reg with the claim engine's counters, under the names the node uses,
// behind the listener guard. It returns a function that stops the server.
func serveClaimsOnly(addr string, allowedHosts []string, reg *prometheus.Registry, eng *claims.Engine, logger *slog.Logger) (stop func(), err error) {
	if addr == "" {
		return func() {}, nil
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}))
	srv, bound, err := httpguard.Start(httpguard.Config{Addr: addr, Handler: mux, AllowedHosts: allowedHosts,
		OpenPaths: []string{"/healthz", "/metrics"}, Logger: logger})
	if err != nil {
		return nil, err
	}
	reg.MustRegister(node.ClaimMetrics(eng)...)
	logger.Info("listening (claims only: /healthz, /metrics)", "addr", bound)
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}, nil
}
