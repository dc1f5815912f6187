package pgsource

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// WaitDatabase waits (up to a minute) until no server listed in url says that url's database
// does not exist. pgx gives up at the first host of a multi-host URL that answers so (SQLSTATE
// 3D000) instead of trying the next, and a standby has a database created on the primary only
// once it has replayed the CREATE DATABASE: without this wait, a client that connects right
// after creating a database can fail on a standby listed first. Hosts that cannot be reached
// at all are not waited for. A one-host URL returns at once.
func WaitDatabase(ctx context.Context, url string) error {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return err
	}
	if len(cfg.Fallbacks) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	hosts := append([]*pgconn.FallbackConfig{{Host: cfg.Host, Port: cfg.Port, TLSConfig: cfg.TLSConfig}}, cfg.Fallbacks...)
	for _, h := range hosts {
		one := cfg.Copy()
		one.Host, one.Port, one.TLSConfig, one.Fallbacks = h.Host, h.Port, h.TLSConfig, nil
		one.ValidateConnect = nil // a standby will do: it is the one that may lag
		one.ConnectTimeout = 2 * time.Second
		for {
			conn, err := pgx.ConnectConfig(ctx, one)
			if err == nil {
				_ = conn.Close(ctx)
				break
			}
			var pgErr *pgconn.PgError
			if !errors.As(err, &pgErr) || pgErr.Code != "3D000" {
				break // up, or down for another reason: not this wait's business
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("database %s not there on %s:%d: %w", cfg.Database, h.Host, h.Port, ctx.Err())
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	return nil
}
