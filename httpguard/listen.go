package httpguard

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
)

// Listener limits applied to zero Config fields.
const (
	ReadTimeoutDefault       = time.Minute
	ReadHeaderTimeoutDefault = 10 * time.Second
	IdleTimeoutDefault       = 2 * time.Minute
	MaxHeaderBytesDefault    = 64 << 10
	MaxConnectionsDefault    = 1024
	// WriteTimeoutDefault is the write timeout with ReadTimeoutDefault; a longer ReadTimeout
	// lengthens it as much (Config.WriteTimeout). The deadline is set once a request's headers
	// are read, so it spans reading the body (up to ReadTimeout), the handler (ingest waits up
	// to 10s for its turn and stores for up to 30s) and writing the answer. A GET has nearly
	// all of it to write a large answer (/metrics, a page of the status page's job list): a
	// megabyte at 10 KB/s. A client that never reads holds its connection no longer than an
	// idle one may (IdleTimeoutDefault).
	WriteTimeoutDefault = 2 * time.Minute
	// ProbeConnections is the reserve of connections beyond MaxConnections that serve only
	// the open paths (LimitConns), each for at most ProbeTimeout.
	ProbeConnections = 16
	ProbeTimeout     = 5 * time.Second
)

// Config is one listener: its address, what it serves, the guard's hosts and open paths, and
// the limits that bound what a client can hold. Every HTTP server batchclaim starts is built
// from one (Listen), so that none lacks the guard or a limit.
type Config struct {
	// Addr is host:port to listen on (port 0 picks a free one).
	Addr string
	// Handler serves the requests that pass the guard.
	Handler http.Handler
	// AllowedHosts are names the listener answers to besides IP literals, localhost and
	// Addr's host (NewHosts).
	AllowedHosts []string
	// OpenPaths skip the host check for GET and HEAD (health, readiness, metrics), and stay
	// reachable when MaxConnections are open: ProbeConnections more may ask for them.
	OpenPaths []string
	// CostlyGETs are path prefixes whose GETs a browser on another site may not make (Guard).
	CostlyGETs []string
	// TLSConfig, when set, makes the listener HTTPS only.
	TLSConfig *tls.Config
	// ReadTimeout bounds reading one request, body included. Zero means ReadTimeoutDefault.
	ReadTimeout time.Duration
	// ReadHeaderTimeout bounds reading one request's headers. Zero means
	// ReadHeaderTimeoutDefault.
	ReadHeaderTimeout time.Duration
	// WriteTimeout bounds a request from the end of its headers to the end of its answer,
	// so that a client that stops reading (its socket buffers full) does not hold its
	// connection for ever. Zero means WriteTimeoutDefault, plus how much ReadTimeout exceeds
	// ReadTimeoutDefault. A handler that works for long before it answers extends it
	// (ExtendWriteDeadline, LimitSeconds).
	WriteTimeout time.Duration
	// IdleTimeout closes keep-alive connections idle this long. Zero means
	// IdleTimeoutDefault.
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds a request's header block in bytes (431 beyond). Zero means
	// MaxHeaderBytesDefault.
	MaxHeaderBytes int
	// MaxConnections bounds the connections open at once; beyond them ProbeConnections
	// more may ask for the OpenPaths only, and one more is closed as soon as it is
	// accepted. Zero means MaxConnectionsDefault.
	MaxConnections int
	// Logger receives the server's own errors (ErrorLog); nil discards.
	Logger *slog.Logger
}

// withDefaults returns c with every zero limit set to its default and a discarding Logger
// when none is set.
func (c Config) withDefaults() Config {
	c.ReadTimeout = cmp.Or(c.ReadTimeout, ReadTimeoutDefault)
	c.ReadHeaderTimeout = cmp.Or(c.ReadHeaderTimeout, ReadHeaderTimeoutDefault)
	c.WriteTimeout = cmp.Or(c.WriteTimeout, WriteTimeoutDefault+max(0, c.ReadTimeout-ReadTimeoutDefault))
	c.IdleTimeout = cmp.Or(c.IdleTimeout, IdleTimeoutDefault)
	c.MaxHeaderBytes = cmp.Or(c.MaxHeaderBytes, MaxHeaderBytesDefault)
	c.MaxConnections = cmp.Or(c.MaxConnections, MaxConnectionsDefault)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// validate checks c after withDefaults.
func (c Config) validate() error {
	if c.Handler == nil {
		return errors.New("listener: a handler is required")
	}
	if c.ReadTimeout < 0 || c.ReadHeaderTimeout < 0 || c.WriteTimeout < 0 || c.IdleTimeout < 0 || c.MaxHeaderBytes < 0 || c.MaxConnections < 0 {
		return fmt.Errorf("listener limits must not be negative (zero means the default), got read timeout %s, read header timeout %s, write timeout %s, idle timeout %s, max header bytes %d, max connections %d",
			c.ReadTimeout, c.ReadHeaderTimeout, c.WriteTimeout, c.IdleTimeout, c.MaxHeaderBytes, c.MaxConnections)
	}
	return nil
}

// Listen listens on cfg.Addr and returns the server that serves cfg.Handler there behind the
// Guard (request ids, the host check, the refusal of cross-origin writes) with the limits
// set, and the listener to pass to its Serve: TLS when cfg.TLSConfig is set, and never more
// than cfg.MaxConnections connections open. The caller may set the server's BaseContext and
// RegisterOnShutdown before serving.
func Listen(cfg Config) (*http.Server, net.Listener, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, nil, err
	}
	hosts, err := NewHosts(cfg.Addr, cfg.AllowedHosts)
	if err != nil {
		return nil, nil, err
	}
	srv := &http.Server{
		Handler:           Guard{Hosts: hosts, OpenPaths: cfg.OpenPaths, CostlyGETs: cfg.CostlyGETs}.Wrap(cfg.Handler),
		TLSConfig:         cfg.TLSConfig,
		ReadTimeout:       cfg.ReadTimeout,
		ReadHeaderTimeout: cfg.ReadHeaderTimeout,
		WriteTimeout:      cfg.WriteTimeout,
		IdleTimeout:       cfg.IdleTimeout,
		MaxHeaderBytes:    cfg.MaxHeaderBytes,
		ErrorLog:          ErrorLog(cfg.Logger),
		ConnContext:       connContext,
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, nil, fmt.Errorf("listen on %s: %w", cfg.Addr, err)
	}
	reserve := 0
	if len(cfg.OpenPaths) > 0 {
		reserve = ProbeConnections
	}
	ln = LimitConns(ln, cfg.MaxConnections, reserve, ProbeTimeout)
	if cfg.TLSConfig != nil {
		ln = tls.NewListener(ln, cfg.TLSConfig)
	}
	return srv, ln, nil
}

// Start is Listen, then serves in a goroutine until the server is shut down or closed (an
// error of Serve is logged). It returns the server, to shut it down, and the address it
// listens on.
func Start(cfg Config) (*http.Server, string, error) {
	srv, ln, err := Listen(cfg)
	if err != nil {
		return nil, "", err
	}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) && cfg.Logger != nil {
			cfg.Logger.Error("http server", "error", err)
		}
	}()
	return srv, ln.Addr().String(), nil
}

// Shutdown shuts srv down gracefully within timeout, even when ctx has ended.
func Shutdown(ctx context.Context, srv *http.Server, timeout time.Duration) error {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	return srv.Shutdown(sctx)
}
