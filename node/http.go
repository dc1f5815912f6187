package node

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/batchclaim/batchclaim/ingest"
	"github.com/batchclaim/batchclaim/ui"
)

// Listener limits applied to zero Config fields.
const (
	ReadTimeoutDefault       = time.Minute
	ReadHeaderTimeoutDefault = 10 * time.Second
	MaxHeaderBytesDefault    = 64 << 10
	MaxIngestRequestsDefault = 64
	// IdleTimeout closes keep-alive connections idle this long.
	IdleTimeout = 2 * time.Minute
	// httpShutdownTimeout bounds the HTTP server's graceful shutdown at the end of a stop.
	httpShutdownTimeout = 2 * time.Second
)

// validate checks the listener's settings.
func (c Config) validate() error {
	var errs []error
	if (c.TLSCertFile == "") != (c.TLSKeyFile == "") {
		errs = append(errs, errors.New("a TLS certificate and key go together: set both or neither"))
	}
	if c.ReadTimeout < 0 || c.ReadHeaderTimeout < 0 {
		errs = append(errs, fmt.Errorf("read timeouts must not be negative, got %s and %s", c.ReadTimeout, c.ReadHeaderTimeout))
	}
	if c.MaxHeaderBytes < 0 || c.MaxIngestRequests < 0 || c.MaxBody < 0 {
		errs = append(errs, fmt.Errorf("listener limits must not be negative, got max header bytes %d, max ingest requests %d, max body %d",
			c.MaxHeaderBytes, c.MaxIngestRequests, c.MaxBody))
	}
	if len(errs) > 0 {
		return fmt.Errorf("node: %w", errors.Join(errs...))
	}
	return nil
}

func (n *Node) listen(ctx context.Context) (*http.Server, error) {
	if n.cfg.Listen == "" {
		return nil, nil
	}
	var tlsCfg *tls.Config
	if n.cfg.TLSCertFile != "" {
		cert, err := tls.LoadX509KeyPair(n.cfg.TLSCertFile, n.cfg.TLSKeyFile)
		if err != nil {
			return nil, fmt.Errorf("load TLS certificate: %w", err)
		}
		tlsCfg = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	ln, err := net.Listen("tcp", n.cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", n.cfg.Listen, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.HandleFunc("GET /readyz", n.ready)
	mux.Handle("GET /metrics", promhttp.HandlerFor(n.registry, promhttp.HandlerOpts{}))
	api := http.NewServeMux()
	ingest.NewHandler(n.pool, ingest.Config{MaxBody: n.cfg.MaxBody, Logger: n.log,
		OnStored: func(k int) { n.metrics.ingested.Add(float64(k)) }}).Register(api)
	limited := limitConcurrency(api, cmp.Or(n.cfg.MaxIngestRequests, MaxIngestRequestsDefault))
	for _, route := range []string{"POST /batches", "GET /batch_statuses", "POST /batch_statuses"} {
		mux.Handle(route, limited)
	}
	page, err := ui.New(n.pool, ui.Config{Logger: n.log})
	if err != nil {
		_ = ln.Close()
		return nil, err
	}
	page.Register(mux) // the status page at /, its assets and its JSON API under /api/
	var handler http.Handler = mux
	if n.cfg.Auth != nil {
		handler = n.cfg.Auth(mux)
	}
	srv := &http.Server{
		Handler:           handler,
		TLSConfig:         tlsCfg,
		ReadTimeout:       cmp.Or(n.cfg.ReadTimeout, ReadTimeoutDefault),
		ReadHeaderTimeout: cmp.Or(n.cfg.ReadHeaderTimeout, ReadHeaderTimeoutDefault),
		MaxHeaderBytes:    cmp.Or(n.cfg.MaxHeaderBytes, MaxHeaderBytesDefault),
		IdleTimeout:       IdleTimeout,
		ErrorLog:          slog.NewLogLogger(n.log.Handler(), slog.LevelWarn),
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	if tlsCfg != nil {
		ln = tls.NewListener(ln, tlsCfg)
	}
	n.mu.Lock()
	n.addr = ln.Addr().String()
	n.mu.Unlock()
	n.log.Info("listening", "addr", n.addr, "tls", tlsCfg != nil, "auth", n.cfg.Auth != nil)
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			n.log.Error("http server", "error", err)
		}
	}()
	return srv, nil
}

// limitConcurrency serves at most max requests at once through next and answers the others
// 503 with Retry-After, in the Sawtooth error shape, without waiting.
func limitConcurrency(next http.Handler, max int) http.Handler {
	sem := make(chan struct{}, max)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case sem <- struct{}{}:
			defer func() { <-sem }()
			next.ServeHTTP(w, r)
		default:
			w.Header().Set("Retry-After", "1")
			ingest.WriteError(w, http.StatusServiceUnavailable, CodeBusy, "Too Many Requests",
				fmt.Sprintf("This instance is serving its limit of %d ingest requests; try again shortly", max))
		}
	})
}

// CodeBusy is the error code of the 503 answered beyond Config.MaxIngestRequests.
const CodeBusy = 31

// ready: the database answers and the instance is registered with a live lease.
func (n *Node) ready(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), time.Second)
	defer cancel()
	if err := n.pool.Ping(ctx); err != nil {
		http.Error(w, "database unreachable: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	if !n.engine.Healthy() {
		http.Error(w, "not registered or fenced (no recent lease renewal)", http.StatusServiceUnavailable)
		return
	}
	_, _ = w.Write([]byte("ready\n"))
}
