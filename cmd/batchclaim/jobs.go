package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/cmd/batchclaim/internal/cli"
	"github.com/batchclaim/batchclaim/cmd/batchclaim/internal/database"
	"github.com/batchclaim/batchclaim/observer"
	"github.com/batchclaim/batchclaim/pgdb"
)

// runRetry runs a finished batch again through observer.Retry, the call behind the status
// page's Retry button.
func runRetry(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return batchCommand(ctx, "retry",
		"Runs batch SEQ again, as the status page's Retry button does: a DISCARDED, CANCELLED or\n"+
			"INVALID batch becomes NEW and goes to the back of its service_id's queue, after the batch\n"+
			"in flight and those stored before the retry; the INVALID batch that halted its\n"+
			"service_id keeps its place and lifts the halt. Its attempts go on counting, with its\n"+
			"attempt limit counted from the retry. A DELAYED batch is sent now. Exit 1 if the batch\n"+
			"is in another state or does not exist (docs/jobs.md, \"Retry\").",
		args, stdout, stderr, func(ctx context.Context, q pgdb.Querier, seq int64, _ string) (observer.Change, error) {
			return observer.Retry(ctx, q, seq)
		})
}

// runCancel cancels a batch through observer.Cancel, the call behind the status page's Cancel
// button.
func runCancel(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return batchCommand(ctx, "cancel",
		"Cancels batch SEQ, as the status page's Cancel button does. A batch that has not run (NEW,\n"+
			"with a run-at time or not, or DELAYED) becomes CANCELLED and its service_id goes on with the\n"+
			"next batch. A running one (INFLIGHT) is asked to stop: the instance running it cancels its\n"+
			"job's context, and it ends CANCELLED once the job returns, unless the job returned done\n"+
			"(docs/jobs.md, \"Cancel a running job\"). Exit 1 if the batch is finished, has an unknown\n"+
			"outcome, or does not exist.",
		args, stdout, stderr, observer.Cancel)
}

// batchCommand is the shape of retry and cancel: one SEQ, one conditional write, the change
// printed.
func batchCommand(ctx context.Context, name, help string, args []string, stdout, stderr io.Writer,
	do func(context.Context, pgdb.Querier, int64, string) (observer.Change, error)) error {
	fs := cli.NewFlagSet(name, "SEQ [flags]", help, stderr)
	dbURL := database.Flag(fs)
	schema := database.SchemaFlag(fs)
	timeout := writeTimeoutFlag(fs)
	reason := "cancelled with batchclaim cancel"
	if name == "cancel" {
		fs.StringVar(&reason, "reason", reason, "why, kept as the batch's last error and in its history")
	}
	rest, err := cli.ParseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(rest) != 1 {
		fmt.Fprintf(stderr, "batchclaim %s: give one SEQ (the batch's number, as the status page and status show it); see batchclaim %s --help\n", name, name)
		return cli.ErrUsage
	}
	seq, err := strconv.ParseInt(rest[0], 10, 64)
	if err != nil || seq <= 0 {
		return fmt.Errorf("SEQ %q: want a positive integer", rest[0])
	}
	if err := checkReason(reason); name == "cancel" && err != nil {
		return fmt.Errorf("--reason: %w", err)
	}
	pool, err := database.OpenSchema(ctx, *dbURL, *schema, 1)
	if err != nil {
		return err
	}
	defer pool.Close()
	var c observer.Change
	err = pgdb.BoundedTx(ctx, pgdb.InSchema(pool, *schema), *timeout, func(ctx context.Context, tx pgx.Tx) (err error) {
		c, err = do(ctx, tx, seq, reason)
		return err
	})
	switch {
	case errors.Is(err, batchclaim.ErrNotFound):
		return fmt.Errorf("there is no batch %d", seq)
	case pgdb.TimedOut(err):
		return writeTimedOut(*timeout, fmt.Sprintf("batch %d", seq), "its row",
			fmt.Sprintf("batchclaim status --job %d", seq))
	case err != nil:
		return database.Explain(*schema, err)
	}
	fmt.Fprintf(stdout, "batch %d of %s: %s -> %s", c.Seq, printable(c.ServiceID), c.From, c.To)
	if c.CancelRequested {
		fmt.Fprintf(stdout, " (running: cancel requested; it ends CANCELLED once its job returns)")
	}
	if c.Resumed {
		fmt.Fprintf(stdout, " (its service_id's halt lifted)")
	}
	fmt.Fprintln(stdout)
	return nil
}

// writeTimeoutDefault bounds retry, cancel and resume: time enough for a lock held by a
// running instance's transaction, which lasts milliseconds.
const writeTimeoutDefault = 10 * time.Second

// writeTimeoutFlag is the --timeout of retry, cancel and resume (pgdb.BoundedTx): without a
// bound the command would wait behind a transaction that holds its row until interrupted.
func writeTimeoutFlag(fs *flag.FlagSet) *time.Duration {
	d := fs.Duration("timeout", writeTimeoutDefault, "give up after this long, when another transaction holds the row or the database does not answer")
	cli.BoundDuration(fs, "timeout", 100*time.Millisecond, time.Hour, "")
	return d
}

// writeTimedOut is the error of a write that ran out of time: what may hold it, and that the
// commit may have been on its way, so the operator looks before trying again.
func writeTimedOut(timeout time.Duration, what, row, look string) error {
	return fmt.Errorf("%s not changed within %s: another transaction may hold %s, or the database does not answer; "+
		"see whether it changed (%s), then try again, with a longer --timeout if a transaction holds it", what, timeout, row, look)
}

// checkReason refuses a reason that says nothing (empty, or blanks), one that is not UTF-8
// (it is stored as text), or one over observer.MaxCancelReason bytes.
func checkReason(r string) error {
	switch {
	case strings.TrimSpace(r) == "":
		return errors.New("give a reason (it is kept with the batch and shown on the status page); leave --reason out for the default")
	case !utf8.ValidString(r):
		return errors.New("not valid UTF-8")
	case len(r) > observer.MaxCancelReason:
		return fmt.Errorf("%d bytes, at most %d", len(r), observer.MaxCancelReason)
	}
	return nil
}
