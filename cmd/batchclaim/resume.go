package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/cmd/batchclaim/internal/cli"
	"github.com/batchclaim/batchclaim/cmd/batchclaim/internal/database"
	"github.com/batchclaim/batchclaim/observer"
	"github.com/batchclaim/batchclaim/pgdb"
)

// runResume lifts the halt of a service_id through observer.Resume, the call behind the status
// page's Resume button.
func runResume(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("resume", "SERVICE_ID [flags]",
		"Lifts the halt of a service_id stopped by an INVALID batch (run --halt-on-invalid), as the\n"+
			"status page's Resume button does: whichever instance holds its claim sends its next batch\n"+
			"from its next cycle on. The INVALID batch stays INVALID. Exit 1 if it was not halted.", stderr)
	dbURL := database.Flag(fs)
	schema := database.SchemaFlag(fs)
	timeout := writeTimeoutFlag(fs)
	rest, err := cli.ParseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(rest) != 1 {
		fmt.Fprintf(stderr, "batchclaim resume: give one SERVICE_ID; see batchclaim resume --help\n")
		return cli.ErrUsage
	}
	id := rest[0]
	if err := batchclaim.ValidateServiceID(id); err != nil {
		return fmt.Errorf("service_id %q: %w", id, err)
	}
	pool, err := database.OpenSchema(ctx, *dbURL, *schema, 1)
	if err != nil {
		return err
	}
	defer pool.Close()
	var halt observer.Halt
	err = pgdb.BoundedTx(ctx, pgdb.InSchema(pool, *schema), *timeout, func(ctx context.Context, tx pgx.Tx) (err error) {
		halt, err = observer.Resume(ctx, tx, id)
		return err
	})
	switch {
	case errors.Is(err, batchclaim.ErrNotFound):
		return fmt.Errorf("service_id %q is not halted", id)
	case pgdb.TimedOut(err):
		return writeTimedOut(*timeout, fmt.Sprintf("service_id %q", id), "its halt", "batchclaim status")
	case err != nil:
		return database.Explain(*schema, err)
	}
	fmt.Fprintf(stdout, "resumed %s: halted at seq %d since %s: %s\n", printable(halt.ServiceID), halt.Seq,
		halt.At.Format(time.RFC3339), printable(halt.Reason))
	return nil
}
