package pgsource

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"

	"github.com/batchclaim/batchclaim/testkit/pglocal"
)

// Kinds of Source.
const (
	KindEnv    = "env"    // a URL from an environment variable; nothing to release
	KindInitdb = "initdb" // a throwaway cluster from local binaries (package pglocal)
	KindDocker = "docker" // a testcontainers-go postgres:15-alpine container
)

// Source is a Postgres server to use and how to give it back.
type Source struct {
	// URL reaches the server. For KindInitdb and KindDocker it is a superuser URL to the
	// postgres database; for KindEnv it is whatever the variable held.
	URL string
	// Kind is KindEnv, KindInitdb or KindDocker.
	Kind string
	// Cluster is the throwaway cluster when Kind is KindInitdb (fault tests restart it),
	// else nil.
	Cluster *pglocal.Cluster

	closeOnce sync.Once
	closeErr  error
	close     func(context.Context) error
}

// Close releases the server: stops the cluster or container it started, nothing for
// KindEnv. Only the first call does anything.
func (s *Source) Close(ctx context.Context) error {
	if s == nil || s.close == nil {
		return nil
	}
	s.closeOnce.Do(func() { s.closeErr = s.close(ctx) })
	return s.closeErr
}

// Acquire finds the server the demo uses: Server with DATABASE_URL.
func Acquire(ctx context.Context, logger *slog.Logger) (src *Source, err error) {
	return Server(ctx, logger, "DATABASE_URL")
}

// Server returns, in this order: the URL in the environment variable envVar when it is set,
// a throwaway cluster from local PostgreSQL binaries, a Docker container when a Docker
// engine answers. Otherwise the error names the three ways to provide one. A URL from the
// environment is not checked here; connecting reports what is wrong with it.
func Server(ctx context.Context, logger *slog.Logger, envVar string) (*Source, error) {
	return server(ctx, logger, envVar, "")
}

// server is Server with the pglocal binary directory as a parameter, for tests.
func server(ctx context.Context, logger *slog.Logger, envVar, binDir string) (*Source, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if u := os.Getenv(envVar); u != "" {
		logger.Debug("postgres from the environment", "variable", envVar)
		return &Source{URL: u, Kind: KindEnv}, nil
	}
	var why []string
	c, err := pglocal.Start(ctx, pglocal.Options{BinDir: binDir, Logger: logger})
	if err == nil {
		return &Source{URL: c.URL(), Kind: KindInitdb, Cluster: c, close: c.Stop}, nil
	}
	if !errors.Is(err, pglocal.ErrNotFound) {
		logger.Warn("throwaway postgres from local binaries failed", "error", err)
	}
	why = append(why, "local cluster: "+err.Error())
	if ctx.Err() != nil {
		return nil, fmt.Errorf("find postgres: %w", ctx.Err())
	}
	if !dockerFallback {
		return nil, fmt.Errorf("no postgres server: set %s or install PostgreSQL server binaries (initdb, pg_ctl); "+
			"this build has no Docker fallback (built with -tags nodocker) (%s)", envVar, strings.Join(why, "; "))
	}
	if endpoint, ok := dockerReachable(ctx); ok {
		logger.Info("starting a postgres container", "docker", endpoint)
		src, err := startContainer(ctx)
		if err == nil {
			return src, nil
		}
		logger.Warn("postgres container failed", "error", err)
		why = append(why, "docker: "+err.Error())
	} else {
		why = append(why, "docker: no engine answers at "+endpoint)
	}
	return nil, fmt.Errorf("no postgres server: set %s, install PostgreSQL server binaries (initdb, pg_ctl), or start Docker (%s)",
		envVar, strings.Join(why, "; "))
}
