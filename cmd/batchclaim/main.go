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

	"github.com/batchclaim/batchclaim/dlt/dltsim"
	"github.com/batchclaim/batchclaim/internal/wallclock"
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
		"run":     {summary: "run an instance: claim service_ids and work on them", run: runDaemon},
		"demo":    {summary: "the whole story on a throwaway database: instances, a ledger simulator, faults", run: runDemo},
		"enqueue": {summary: "store the batches of a BatchList for a service_id", run: runEnqueue},
		"bench":   {summary: "measure the job-runner and ledger paths, idle latency and the claim cycle (docs/performance.md)", run: runBench},
		"chaos":   {summary: "inject faults from a seed into real instances, then check the recorded history", run: runChaos},
		"version": {summary: "print the release, module version and commit of this binary", run: runVersion},
		"dlt-sim": {summary: "run the ledger simulator (Sawtooth REST API or Splinter scabbard)", run: dltsim.Command},
		"ui":      {summary: "serve the live status page from the database, without running an instance", run: runUI},

		"election": {summary: "one primary per role: run an elector (election run) or the fault demo (election demo)", run: runElection},
		"primary":  {summary: "exit 0 if this host's instance is the live primary of --role, 1 if not", run: runPrimary},

		"failover":     {summary: "owner-token lock and best-replica shard failover: run a node (failover node) or the fault demo (failover demo)", run: runFailover},
		"singleflight": {summary: "per-key single-flight cache: the fault demo (singleflight demo)", run: runSingleflight},

		"heartbeat": {summary: "active/standby missed-heartbeat events: heartbeat run | event-types | demo", run: runHeartbeat},
	}
}

// errUsage marks errors for which the command's usage was already printed.
var errUsage = errors.New("usage")

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
	case errors.Is(err, errUsage):
		return 2
	case errors.Is(err, context.Canceled) && ctx.Err() != nil:
		return 130
	}
	// An error that already names the command (a package's own command, such as dltsim's)
	// is not prefixed twice.
	msg := strings.TrimPrefix(oneLine(err), args[0]+": ")
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

// newFlagSet returns a FlagSet whose usage text starts with synopsis and describe.
func newFlagSet(name, synopsis, describe string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: batchclaim %s %s\n\n%s\n\nFlags:\n", name, synopsis, describe)
		fs.PrintDefaults()
	}
	return fs
}

// parse parses args, fills flags left unset from BATCHCLAIM_<FLAG> environment variables (and
// --database-url from DATABASE_URL), and turns flag errors into errUsage after one short line
// naming the flag. A BATCHCLAIM_ variable that no flag of this command or of run reads is an
// error: a mistyped name would otherwise be ignored and its flag keep its default.
func parse(fs *flag.FlagSet, args []string) error {
	if err := parseArgs(fs, args); err != nil {
		return err
	}
	if err := checkEnv(fs, os.Environ()); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if set[f.Name] || err != nil {
			return
		}
		env := envName(f.Name)
		v, ok := os.LookupEnv(env)
		if !ok && f.Name == "database-url" {
			env = "DATABASE_URL"
			v, ok = os.LookupEnv(env)
		}
		if ok {
			if e := fs.Set(f.Name, v); e != nil {
				err = fmt.Errorf("environment %s=%q: %w", env, v, e)
			}
		}
	})
	return err
}

// parseArgs is fs.Parse with the whole usage only for --help: any other flag error is one line
// on the flag set's output, naming the closest flag when the name was mistyped.
func parseArgs(fs *flag.FlagSet, args []string) error {
	out, usage := fs.Output(), fs.Usage
	fs.SetOutput(io.Discard) // the line below replaces the flag package's message and usage
	fs.Usage = func() {}
	err := fs.Parse(args)
	fs.SetOutput(out)
	fs.Usage = usage
	switch {
	case err == nil:
		return nil
	case errors.Is(err, flag.ErrHelp):
		fs.Usage()
		return err
	}
	text := strings.Replace(err.Error(), " for flag -", " for --", 1)
	if name, ok := strings.CutPrefix(text, "flag provided but not defined: -"); ok {
		text = "unknown flag --" + name
		if near := closest(name, flagNames(fs)); near != "" {
			text += " (did you mean --" + near + "?)"
		}
	}
	fmt.Fprintf(out, "batchclaim %s: %s; see batchclaim %s --help\n", fs.Name(), text, fs.Name())
	return errUsage
}

// envName is the environment variable that sets flag name when the command line does not.
func envName(name string) string {
	return "BATCHCLAIM_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// envOthers are BATCHCLAIM_ variables that are not flags: the wall-clock offset of the tests
// and the passwords the scripts under deploy/ read. A process may see them and must start.
var envOthers = []string{wallclock.EnvOffset,
	"BATCHCLAIM_DB_PASSWORD", "BATCHCLAIM_OWNER_PASSWORD", "BATCHCLAIM_APP_PASSWORD", "BATCHCLAIM_ADMIN_PASSWORD"}

// checkEnv refuses a BATCHCLAIM_ variable of environ that names no flag of fs nor of run (a
// deployment's environment is run's; a status or migrate in the same environment must not
// fail on it).
func checkEnv(fs *flag.FlagSet, environ []string) error {
	known := map[string]bool{}
	for _, n := range envOthers {
		known[n] = true
	}
	own := flagNames(fs)
	var candidates []string
	for _, n := range own {
		known[envName(n)] = true
		candidates = append(candidates, envName(n))
	}
	if fs.Name() != "run" {
		newRunFlags(io.Discard).fs.VisitAll(func(f *flag.Flag) { known[envName(f.Name)] = true })
	}
	var unknown []string
	for _, kv := range environ {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "BATCHCLAIM_") && !known[k] {
			unknown = append(unknown, k)
		}
	}
	sort.Strings(unknown)
	var errs []error
	for _, k := range unknown {
		e := fmt.Sprintf("environment %s: no flag of %s reads it", k, fs.Name())
		if near := closest(k, candidates); near != "" {
			e += " (did you mean " + near + "?)"
		}
		errs = append(errs, errors.New(e))
	}
	return errors.Join(errs...)
}

func flagNames(fs *flag.FlagSet) []string {
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	return names
}

// closest returns the candidate nearest to s when a typo could explain the difference (an edit
// distance of at most a third of s's length, and at most 3), or "".
func closest(s string, candidates []string) string {
	best, bestD := "", min(3, max(1, len(s)/3))+1
	for _, c := range candidates {
		if d := editDistance(strings.ToLower(s), strings.ToLower(c)); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

func errorf(format string, a ...any) error { return fmt.Errorf(format, a...) }

// parseInterspersed is parse for commands with positional arguments, allowing flags before,
// between and after them. It returns the positional arguments.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := parse(fs, args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos, args = append(pos, args[0]), args[1:]
	}
}

func oneLine(err error) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(err.Error(), "\n", "; ")), " ")
}
