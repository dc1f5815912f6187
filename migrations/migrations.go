package migrations

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"strings"

	"github.com/golang-migrate/migrate/v4"
	_ "github.com/golang-migrate/migrate/v4/database/pgx/v5" // registers pgx5://
	"github.com/golang-migrate/migrate/v4/source/iofs"
)

//go:embed *.sql
var files embed.FS

// FS returns the embedded migration files.
func FS() embed.FS { return files }

// Up applies every migration not yet applied.
func Up(ctx context.Context, databaseURL string) error {
	return run(ctx, databaseURL, func(m *migrate.Migrate) error { return m.Up() })
}

// Down reverts steps migrations (all of them when steps <= 0).
func Down(ctx context.Context, databaseURL string, steps int) error {
	return run(ctx, databaseURL, func(m *migrate.Migrate) error {
		if steps <= 0 {
			return m.Down()
		}
		return m.Steps(-steps)
	})
}

// Version reports the applied version and whether a failed migration left it dirty.
// Version 0 means nothing is applied.
func Version(ctx context.Context, databaseURL string) (version uint, dirty bool, err error) {
	err = run(ctx, databaseURL, func(m *migrate.Migrate) error {
		var e error
		version, dirty, e = m.Version()
		if errors.Is(e, migrate.ErrNilVersion) {
			version, dirty, e = 0, false, nil
		}
		return e
	})
	return version, dirty, err
}

// Latest is the highest version among the embedded files.
func Latest() (uint, error) {
	src, err := iofs.New(files, ".")
	if err != nil {
		return 0, err
	}
	defer src.Close()
	v, err := src.First()
	if err != nil {
		return 0, err
	}
	for {
		next, err := src.Next(v)
		if err != nil {
			return v, nil //nolint:nilerr // end of the list
		}
		v = next
	}
}

func run(ctx context.Context, databaseURL string, step func(*migrate.Migrate) error) error {
	src, err := iofs.New(files, ".")
	if err != nil {
		return fmt.Errorf("read embedded migrations: %w", err)
	}
	m, err := migrate.NewWithSourceInstance("iofs", src, driverURL(databaseURL))
	if err != nil {
		return fmt.Errorf("open database for migrations: %w", err)
	}
	defer m.Close()
	// Let a cancelled context stop a long migration between steps.
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-ctx.Done():
			select {
			case m.GracefulStop <- true:
			default:
			}
		case <-done:
		}
	}()
	if err := step(m); err != nil && !errors.Is(err, migrate.ErrNoChange) {
		return err
	}
	return ctx.Err()
}

// driverURL rewrites a postgres:// URL to the pgx5:// scheme the migrate driver registers.
func driverURL(u string) string {
	for _, p := range []string{"postgresql://", "postgres://"} {
		if strings.HasPrefix(u, p) {
			return "pgx5://" + strings.TrimPrefix(u, p)
		}
	}
	return u
}
