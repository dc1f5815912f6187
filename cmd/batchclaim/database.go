package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// dbFlag registers --database-url.
func dbFlag(fs *flag.FlagSet) *string {
	return fs.String("database-url", "", "Postgres URL, e.g. postgres://user@host:5432/db (default $DATABASE_URL)")
}

// openPool connects and pings, so that a bad URL or an unreachable database fails here with
// one clear line instead of on first use. Each option adjusts the pool's config first.
func openPool(ctx context.Context, dbURL string, maxConns int32, options ...func(*pgxpool.Config)) (*pgxpool.Pool, error) {
	if dbURL == "" {
		return nil, errors.New("no database: set --database-url or DATABASE_URL")
	}
	cfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		return nil, fmt.Errorf("bad database URL: %w", err)
	}
	if maxConns > 0 {
		cfg.MaxConns = maxConns
	}
	cfg.ConnConfig.ConnectTimeout = 5 * time.Second
	for _, o := range options {
		o(cfg)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("bad database URL: %w", err)
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := pool.Ping(pctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("cannot reach database at %s: %w", where(cfg), err)
	}
	return pool, nil
}

// checkURL validates a URL without connecting (migrations open their own connection).
func checkURL(ctx context.Context, dbURL string) error {
	pool, err := openPool(ctx, dbURL, 1)
	if err != nil {
		return err
	}
	pool.Close()
	return nil
}

func where(cfg *pgxpool.Config) string {
	return fmt.Sprintf("%s:%d/%s", cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.Database)
}
