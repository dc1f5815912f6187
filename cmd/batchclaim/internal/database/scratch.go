package database

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/batchclaim/batchclaim/cmd/batchclaim/internal/redact"
	"github.com/batchclaim/batchclaim/migrations"
	"github.com/batchclaim/batchclaim/testkit/pgsource"
)

// Scratch is a migrated database created for one demo or bench run on whatever server
// pgsource found, dropped at the end unless kept.
type Scratch struct {
	URL    string           // the scratch database
	Source *pgsource.Source // the server it is on
	Admin  string           // the server's URL, to create and drop databases through
	Name   string           // the scratch database's name
	keep   bool
}

// NewScratch creates the scratch database and migrates it, with opts (migrations.InSchema
// for batchclaim's tables in another schema).
func NewScratch(ctx context.Context, prefix string, keep bool, out io.Writer, logger *slog.Logger, opts ...migrations.Option) (*Scratch, error) {
	src, err := pgsource.Acquire(ctx, logger)
	if err != nil {
		return nil, err
	}
	s := &Scratch{Source: src, Admin: src.URL, keep: keep, Name: fmt.Sprintf("%s_%d_%d", prefix, os.Getpid(), time.Now().Unix()%100000)}
	fmt.Fprintf(out, "database: %s (%s)\n", redact.URL(src.URL), src.Kind)
	u, err := url.Parse(s.Admin)
	if err != nil {
		_ = src.Close(ctx)
		return nil, fmt.Errorf("database URL: %w", err)
	}
	u.Path = "/" + s.Name
	s.URL = u.String()
	conn, err := pgx.Connect(ctx, s.Admin)
	if err != nil {
		_ = src.Close(ctx)
		return nil, fmt.Errorf("connect to %s: %w", redact.URL(s.Admin), err)
	}
	_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{s.Name}.Sanitize())
	conn.Close(ctx)
	if err != nil {
		_ = src.Close(ctx)
		return nil, fmt.Errorf("create scratch database %s (the demo needs CREATEDB on the server): %w", s.Name, err)
	}
	if err := pgsource.WaitDatabase(ctx, s.URL); err != nil { // every standby of a multi-host URL
		s.Close(ctx)
		return nil, err
	}
	if err := migrations.Up(ctx, s.URL, opts...); err != nil {
		s.Close(ctx)
		return nil, fmt.Errorf("migrate scratch database: %w", err)
	}
	return s, nil
}

// Close drops the scratch database and releases the server, unless asked to keep them.
func (s *Scratch) Close(ctx context.Context) {
	if s.keep {
		fmt.Fprintf(os.Stderr, "kept database %s\n", redact.URL(s.URL))
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 20*time.Second)
	defer cancel()
	if conn, err := pgx.Connect(ctx, s.Admin); err == nil {
		_, _ = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{s.Name}.Sanitize()+" WITH (FORCE)")
		conn.Close(ctx)
	}
	_ = s.Source.Close(ctx)
}
