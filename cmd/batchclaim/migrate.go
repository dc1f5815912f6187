package main

import (
	"context"
	"fmt"
	"io"
	"strconv"

	"github.com/batchclaim/batchclaim/cmd/batchclaim/internal/cli"
	"github.com/batchclaim/batchclaim/cmd/batchclaim/internal/database"
	"github.com/batchclaim/batchclaim/migrations"
	"github.com/batchclaim/batchclaim/pgdb"
)

func runMigrate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("migrate", "up | down [N] | version [flags]",
		"Applies the embedded schema migrations (up), reverts N of them (down N; down alone reverts\none, down 0 reverts all), or prints the applied version (version).", stderr)
	dbURL := database.Flag(fs)
	schema := database.SchemaFlag(fs)
	lockTimeout := fs.Duration("lock-timeout", migrations.LockTimeoutDefault,
		"how long each migration waits for a lock on a table before it is rolled back and tried again after as long a pause,\n"+
			"until it gets its locks (0: wait as long as it takes; meanwhile every statement on that table waits behind it)")
	rest, err := cli.ParseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(rest) == 0 {
		fs.Usage()
		return cli.ErrUsage
	}
	action, rest := rest[0], rest[1:]
	if action != "up" && action != "down" && action != "version" {
		return fmt.Errorf("unknown action %q: want up, down [N] or version", action)
	}
	if err := database.CheckURL(ctx, *dbURL); err != nil {
		return err
	}
	if len(rest) > 1 || (len(rest) == 1 && action != "down") {
		return errorf("unexpected argument %q", rest[len(rest)-1])
	}
	if err := pgdb.ValidateSchema(*schema); err != nil {
		return fmt.Errorf("--schema: %w", err)
	}
	latest, err := migrations.Latest()
	if err != nil {
		return err
	}
	in := migrations.InSchema(*schema)
	locks := []migrations.Option{in, migrations.LockTimeout(*lockTimeout), migrations.OnLockWait(func(w migrations.LockWait) {
		fmt.Fprintf(stderr, "migration %d waited %v for a lock and was rolled back (attempt %d); trying again in %v. The oldest transactions holding locks on the schema's tables:\n",
			w.Version, *lockTimeout, w.Attempt, w.Retry)
		for _, h := range w.Holders {
			fmt.Fprintf(stderr, "  %s\n", h)
		}
	})}
	switch action {
	case "up":
		if err := migrations.Up(ctx, *dbURL, append(locks, migrations.OnMove(func(v uint) {
			fmt.Fprintf(stdout, "moving the tables of schema version %d from public into %s\n", v, *schema)
		}))...); err != nil {
			return fmt.Errorf("migrate up: %w", err)
		}
	case "down":
		steps := 1
		if len(rest) > 0 {
			if steps, err = strconv.Atoi(rest[0]); err != nil || steps < 0 {
				return fmt.Errorf("down takes a number of steps >= 0, got %q", rest[0])
			}
		}
		if err := migrations.Down(ctx, *dbURL, steps, locks...); err != nil {
			return fmt.Errorf("migrate down: %w", err)
		}
	}
	v, dirty, err := migrations.Version(ctx, *dbURL, in)
	if err != nil {
		return err
	}
	state := "clean"
	if dirty {
		state = "DIRTY: a migration failed halfway; fix the schema by hand, then force the version"
	}
	fmt.Fprintf(stdout, "schema version %d of %d in schema %s (%s)\n", v, latest, *schema, state)
	return nil
}
