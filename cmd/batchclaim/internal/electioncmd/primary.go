package electioncmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/cmd/batchclaim/internal/cli"
	"github.com/batchclaim/batchclaim/cmd/batchclaim/internal/database"
	"github.com/batchclaim/batchclaim/patterns/election"
	"github.com/batchclaim/batchclaim/pgdb"
)

// Primary is `batchclaim primary`: the source design's CheckPrimary for the other
// services on a host. Exit status 0: this host's instance is the role's live primary; 1: it
// is not (who is, if anyone, is printed); 2: the question could not be answered.
func Primary(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("primary", "--role R [flags]",
		"Exits 0 if the live primary of role R (as elected by `batchclaim election run`) runs on\n"+
			"this host, 1 if not (and prints who is), 2 on error. A script or service on the same\n"+
			"host can run it every heartbeat interval and stop working as primary when it fails.\n"+
			"It is advisory: writes that only the primary may make must be fenced by the term's epoch.", stderr)
	dbURL := database.Flag(fs)
	schema := database.SchemaFlag(fs)
	role := fs.String("role", "", "the role to ask about (required)")
	host := fs.String("host", "", "the host to compare with (default: this machine's hostname)")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "batchclaim primary: unexpected argument %q\n", fs.Arg(0))
		return cli.ErrUsage
	}
	if *role == "" {
		fmt.Fprintln(stderr, "batchclaim primary: --role is required")
		return cli.ErrUsage
	}
	if err := pgdb.ValidateSchema(*schema); err != nil {
		return cli.ExitError{Code: 2, Msg: "--schema: " + err.Error()}
	}
	if *host == "" {
		h, err := os.Hostname()
		if err != nil {
			return cli.ExitError{Code: 2, Msg: fmt.Sprintf("hostname: %v", err)}
		}
		*host = h
	}
	pool, err := database.OpenSchema(ctx, *dbURL, *schema, 1)
	if err != nil {
		return cli.ExitError{Code: 2, Msg: err.Error()}
	}
	defer pool.Close()
	db, err := pgdb.Open(pool, *schema)
	if err != nil {
		return cli.ExitError{Code: 2, Msg: err.Error()}
	}
	t, err := election.GetPrimary(ctx, db, *role)
	switch {
	case errors.Is(err, batchclaim.ErrNotFound):
		fmt.Fprintf(stdout, "role %s has no live primary\n", *role)
		return cli.ExitError{Code: 1, Msg: fmt.Sprintf("no live primary of role %s", *role)}
	case err != nil:
		return cli.ExitError{Code: 2, Msg: database.Explain(*schema, err).Error()}
	}
	fmt.Fprintf(stdout, "role %s: primary %s on host %s (epoch %d, instance %s)\n", t.Role, t.Name, t.Host, t.Epoch, t.InstanceID)
	if t.Host != *host {
		return cli.ExitError{Code: 1, Msg: fmt.Sprintf("the primary of role %s runs on host %s, not %s", *role, t.Host, *host)}
	}
	return nil
}
