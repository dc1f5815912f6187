package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"

	"github.com/batchclaim/batchclaim/cmd/batchclaim/internal/bench"
	"github.com/batchclaim/batchclaim/cmd/batchclaim/internal/cli"
	"github.com/batchclaim/batchclaim/cmd/batchclaim/internal/demo"
	"github.com/batchclaim/batchclaim/cmd/batchclaim/internal/electioncmd"
	"github.com/batchclaim/batchclaim/cmd/batchclaim/internal/failovercmd"
	"github.com/batchclaim/batchclaim/cmd/batchclaim/internal/heartbeatcmd"
	"github.com/batchclaim/batchclaim/cmd/batchclaim/internal/singleflightcmd"
	"github.com/batchclaim/batchclaim/dlt/dltsim"
)

// command is one subcommand of the CLI.
type command struct {
	summary string
	hidden  bool
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

var commands map[string]command

func init() {
	commands = map[string]command{
		"migrate": {summary: "apply, revert or show the schema version (up | down [N] | version)", run: runMigrate},
		"status":  {summary: "show instances, claims and batches", run: runStatus},
		"resume":  {summary: "lift the halt of a service_id stopped by an INVALID batch", run: runResume},
		"retry":   {summary: "run a DISCARDED, CANCELLED or INVALID batch again, or a DELAYED one now", run: runRetry},
		"cancel":  {summary: "cancel a batch: at once if it has not run, else once its job returns", run: runCancel},
		"run":     {summary: "run an instance: claim service_ids and work on them", run: runDaemon},
		"demo":    {summary: "the whole story on a throwaway database: instances, a ledger simulator, faults", run: demo.Command},
		"enqueue": {summary: "store the batches of a BatchList for a service_id", run: runEnqueue},
		"bench":   {summary: "measure the job-runner and ledger paths, idle latency and the claim cycle (docs/performance.md)", run: bench.Command},
		"chaos":   {summary: "inject faults from a seed into real instances, then check the recorded history", run: runChaos},
		"version": {summary: "print the release, module version and commit of this binary", run: runVersion},
		"dlt-sim": {summary: "run the ledger simulator (Sawtooth REST API or Splinter scabbard)", run: dltsim.Command},
		"ui":      {summary: "serve the live status page from the database, without running an instance", run: runUI},

		"election": {summary: "one primary per role: run an elector (election run) or the fault demo (election demo)", run: electioncmd.Command},
		"primary":  {summary: "exit 0 if this host's instance is the live primary of --role, 1 if not", run: electioncmd.Primary},

		"failover":     {summary: "owner-token lock and best-replica shard failover: run a node (failover node) or the fault demo (failover demo)", run: failovercmd.Command},
		"singleflight": {summary: "per-key single-flight cache: the fault demo (singleflight demo)", run: singleflightcmd.Command},

		"heartbeat": {summary: "active/standby missed-heartbeat events: heartbeat run | event-types | demo", run: heartbeatcmd.Command},
	}
	// A deployment's environment is run's: every command accepts its BATCHCLAIM_ variables.
	cli.SharedFlags = func() *flag.FlagSet { return newRunFlags(io.Discard).fs }
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := realMain(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func realMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stdout)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "batchclaim: unknown command %q (see batchclaim --help)\n", args[0])
		return 2
	}
	err := cmd.run(ctx, args[1:], stdout, stderr)
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, cli.ErrUsage):
		return 2
	case errors.Is(err, context.Canceled) && ctx.Err() != nil:
		return 130
	}
	// An error that already names the command (a package's own command, such as dltsim's)
	// is not prefixed twice.
	msg := strings.TrimPrefix(cli.OneLine(err), args[0]+": ")
	fmt.Fprintf(stderr, "batchclaim %s: %s\n", args[0], strings.Replace(msg, " for flag -", " for --", 1))
	var ec exitCoder
	if errors.As(err, &ec) {
		return ec.ExitCode()
	}
	return 1
}

type exitCoder interface{ ExitCode() int }

func usage(w io.Writer) {
	fmt.Fprintf(w, "batchclaim distributes batch submission across instances through claims in Postgres.\n\n")
	fmt.Fprintf(w, "Usage: batchclaim COMMAND [flags]\n\nCommands:\n")
	names := make([]string, 0, len(commands))
	for n, c := range commands {
		if !c.hidden {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	width := 0
	for _, n := range names {
		width = max(width, len(n))
	}
	for _, n := range names {
		fmt.Fprintf(w, "  %-*s  %s\n", width, n, commands[n].summary)
	}
	fmt.Fprintf(w, "\nRun 'batchclaim COMMAND --help' for a command's flags.\n")
	fmt.Fprintf(w, "The database comes from --database-url or DATABASE_URL.\n")
}

func errorf(format string, a ...any) error { return fmt.Errorf(format, a...) }
