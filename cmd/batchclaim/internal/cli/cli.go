package cli

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/batchclaim/batchclaim/wallclock"
)

// ErrUsage marks errors for which the command's usage was already printed.
var ErrUsage = errors.New("usage")

// SharedFlags returns the flags whose BATCHCLAIM_ variables every command accepts besides its
// own (run's: a deployment's environment is run's, and a status or migrate in the same
// environment must not fail on it). The program sets it; nil: none.
var SharedFlags func() *flag.FlagSet

// NewFlagSet returns a FlagSet whose usage text starts with synopsis and describe.
func NewFlagSet(name, synopsis, describe string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: batchclaim %s %s\n\n%s\n\nFlags:\n", name, synopsis, describe)
		fs.PrintDefaults()
	}
	return fs
}

// Parse parses args, fills flags left unset from BATCHCLAIM_<FLAG> environment variables (and
// --database-url from DATABASE_URL), and turns flag errors into ErrUsage after one short line
// naming the flag. A BATCHCLAIM_ variable that no flag of this command or of run reads is an
// error: a mistyped name would otherwise be ignored and its flag keep its default. Then it
// checks every numeric flag given against its bound (Bound) and resolves the secret flags
// (SecretFlag): the command line wins over the environment, and the two forms of a secret in
// one place are an error. A secret given on the command line is warned about: through the
// logger of LogFlags when the command has one, else on the flag set's output.
func Parse(fs *flag.FlagSet, args []string) error {
	if err := parseArgs(fs, args); err != nil {
		return err
	}
	return finish(fs)
}

// finish is Parse once the command line is parsed.
func finish(fs *flag.FlagSet) error {
	if err := CheckEnv(fs, os.Environ()); err != nil {
		return err
	}
	m := metaOf(fs)
	argv := map[string]bool{}
	given := map[string]string{}
	fs.Visit(func(f *flag.Flag) { argv[f.Name], given[f.Name] = true, "--"+f.Name })
	// A secret given on the command line in either form leaves the environment's forms unread.
	skip := map[string]bool{}
	for name, s := range m.secrets {
		if s.file != "" && (argv[name] || argv[s.file]) {
			skip[name], skip[s.file] = true, true
		}
	}
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if argv[f.Name] || skip[f.Name] || err != nil {
			return
		}
		env := EnvName(f.Name)
		v, ok := os.LookupEnv(env)
		if ok {
			if e := fs.Set(f.Name, v); e != nil {
				err = fmt.Errorf("environment %s=%q: %w", env, v, e)
			}
			given[f.Name] = "environment " + env
		}
	})
	if err != nil {
		return err
	}
	// DATABASE_URL is the last resort of --database-url: after both forms of the command line
	// and of BATCHCLAIM_ variables.
	if f := fs.Lookup("database-url"); f != nil && given["database-url"] == "" && given["database-url-file"] == "" {
		if v, ok := os.LookupEnv("DATABASE_URL"); ok {
			if err := fs.Set(f.Name, v); err != nil {
				return fmt.Errorf("environment DATABASE_URL: %w", err)
			}
			given[f.Name] = "environment DATABASE_URL"
		}
	}
	if err := errors.Join(checkBounds(fs, given), resolveSecrets(fs, given, argv)); err != nil {
		return err
	}
	if fs.Lookup("log-level") == nil { // no logger will say them
		for _, w := range Warnings(fs) {
			fmt.Fprintf(fs.Output(), "batchclaim %s: warning: %s\n", fs.Name(), w)
		}
	}
	return nil
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
	return ErrUsage
}

// EnvName is the environment variable that sets flag name when the command line does not.
func EnvName(name string) string {
	return "BATCHCLAIM_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// envOthers are BATCHCLAIM_ variables that are not flags: the wall-clock offset and clock
// rate of the tests and the passwords the scripts under deploy/ read. A process may see them and must start.
var envOthers = []string{wallclock.EnvOffset, wallclock.EnvRate,
	"BATCHCLAIM_DB_PASSWORD", "BATCHCLAIM_OWNER_PASSWORD", "BATCHCLAIM_APP_PASSWORD", "BATCHCLAIM_ADMIN_PASSWORD"}

// CheckEnv refuses a BATCHCLAIM_ variable of environ that names no flag of fs nor of run (a
// deployment's environment is run's; a status or migrate in the same environment must not
// fail on it).
func CheckEnv(fs *flag.FlagSet, environ []string) error {
	known := map[string]bool{}
	for _, n := range envOthers {
		known[n] = true
	}
	own := flagNames(fs)
	var candidates []string
	for _, n := range own {
		known[EnvName(n)] = true
		candidates = append(candidates, EnvName(n))
	}
	if fs.Name() != "run" && SharedFlags != nil {
		SharedFlags().VisitAll(func(f *flag.Flag) { known[EnvName(f.Name)] = true })
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

// ParseInterspersed is Parse for commands with positional arguments, allowing flags before,
// between and after them. It returns the positional arguments.
func ParseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := parseArgs(fs, args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, finish(fs)
		}
		pos, args = append(pos, args[0]), args[1:]
	}
}

func OneLine(err error) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(err.Error(), "\n", "; ")), " ")
}

// ExitError is an error with the exit status the program ends with (Msg on stderr).
type ExitError struct {
	Code int
	Msg  string
}

func (e ExitError) Error() string { return e.Msg }

// ExitCode is the process's exit status.
func (e ExitError) ExitCode() int { return e.Code }

// WriteSummary prints a demo's or a run's summary: one indented JSON object with asJSON,
// else the text print writes.
func WriteSummary(w io.Writer, asJSON bool, v any, print func(io.Writer)) error {
	if !asJSON {
		print(w)
		return nil
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
