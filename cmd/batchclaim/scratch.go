package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/batchclaim/batchclaim/internal/pgsource"
	"github.com/batchclaim/batchclaim/migrations"
)

// scratchDB is a migrated database created for one demo or bench run on whatever server
// pgsource found, dropped at the end unless kept.
type scratchDB struct {
	URL    string
	source *pgsource.Source
	admin  string
	name   string
	keep   bool
}

func newScratchDB(ctx context.Context, prefix string, keep bool, out io.Writer, logger *slog.Logger) (*scratchDB, error) {
	src, err := pgsource.Acquire(ctx, logger)
	if err != nil {
		return nil, err
	}
	s := &scratchDB{source: src, admin: src.URL, keep: keep, name: fmt.Sprintf("%s_%d_%d", prefix, os.Getpid(), time.Now().Unix()%100000)}
	fmt.Fprintf(out, "database: %s (%s)\n", redact(src.URL), src.Kind)
	u, err := url.Parse(s.admin)
	if err != nil {
		_ = src.Close(ctx)
		return nil, fmt.Errorf("database URL: %w", err)
	}
	u.Path = "/" + s.name
	s.URL = u.String()
	conn, err := pgx.Connect(ctx, s.admin)
	if err != nil {
		_ = src.Close(ctx)
		return nil, fmt.Errorf("connect to %s: %w", redact(s.admin), err)
	}
	_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{s.name}.Sanitize())
	conn.Close(ctx)
	if err != nil {
		_ = src.Close(ctx)
		return nil, fmt.Errorf("create scratch database %s (the demo needs CREATEDB on the server): %w", s.name, err)
	}
	if err := pgsource.WaitDatabase(ctx, s.URL); err != nil { // every standby of a multi-host URL
		s.Close(ctx)
		return nil, err
	}
	if err := migrations.Up(ctx, s.URL); err != nil {
		s.Close(ctx)
		return nil, fmt.Errorf("migrate scratch database: %w", err)
	}
	return s, nil
}

// Close drops the scratch database and releases the server, unless asked to keep them.
func (s *scratchDB) Close(ctx context.Context) {
	if s.keep {
		fmt.Fprintf(os.Stderr, "kept database %s\n", redact(s.URL))
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 20*time.Second)
	defer cancel()
	if conn, err := pgx.Connect(ctx, s.admin); err == nil {
		_, _ = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{s.name}.Sanitize()+" WITH (FORCE)")
		conn.Close(ctx)
	}
	_ = s.source.Close(ctx)
}
