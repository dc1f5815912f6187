package main

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/batchclaim/batchclaim/cmd/batchclaim/internal/testbin"
)

// numericFlag is a numeric flag of one command as its --help lists it.
type numericFlag struct {
	command []string // "run", or "election", "run"
	name    string
	kind    string // int, uint, duration, float
}

// hiddenCommands are subcommands that no usage text lists (started by a demo, not by people).
var hiddenCommands = [][]string{{"singleflight", "worker"}}

// unboundedNegative are the flags whose negative values mean something (their help says
// which), by command and name; every other numeric flag refuses -5.
var unboundedNegative = map[string]string{
	"failover node --jitter": "negative: no jitter",
	"dlt-sim --history":      "negative: an unlimited history",
	"dlt-sim --seed":         "any int64 is a seed",
	"chaos --seed":           "any int64 is a seed",
}

// wholeRange are the flags whose bound is their type's whole range (a seed, a transaction
// id): a huge value is a setting there, so the test does not start the command with one.
var wholeRange = map[string]bool{"dlt-sim --seed": true, "chaos --seed": true, "failover node --progress": true, "status --job": true}

var (
	usageCommands = regexp.MustCompile(`^Usage: batchclaim \S+ ([a-z-]+(?:\|[a-z-]+)+) `)
	numericLine   = regexp.MustCompile(`(?m)^\s+-([a-z0-9-]+) (int|uint|duration|float)\b`)
)

// numericFlags lists the numeric flags of every command and subcommand of the binary, from
// their --help.
func numericFlags(t *testing.T, bin string) []numericFlag {
	t.Helper()
	help := func(cmd []string) string {
		out, _ := exec.Command(bin, append(slices.Clone(cmd), "--help")...).CombinedOutput()
		return string(out)
	}
	var cmds [][]string
	names := make([]string, 0, len(commands))
	for name := range commands {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		out := help([]string{name})
		if m := usageCommands.FindStringSubmatch(out); m != nil {
			for _, sub := range strings.Split(m[1], "|") {
				cmds = append(cmds, []string{name, sub})
			}
			continue
		}
		cmds = append(cmds, []string{name})
	}
	cmds = append(cmds, hiddenCommands...)
	var flags []numericFlag
	for _, cmd := range cmds {
		for _, m := range numericLine.FindAllStringSubmatch(help(cmd), -1) {
			flags = append(flags, numericFlag{cmd, m[1], m[2]})
		}
	}
	return flags
}

// Every numeric flag of every command has a bound: a value far past it (99999999999 of a
// count, 100000h of a duration) and a negative one stop the command at once with an error
// naming the flag, before it touches a database or starts anything. The test finds the
// flags from the commands' --help, so a flag added without a bound fails here.
func TestEveryNumericFlagIsBounded(t *testing.T) {
	t.Parallel()
	bin := testbin.Path(t)
	flags := numericFlags(t, bin)
	if len(flags) < 100 {
		t.Fatalf("found %d numeric flags: is --help parsed?", len(flags))
	}
	huge := map[string]string{"int": "99999999999", "uint": "99999999999", "duration": "100000h", "float": "1e12"}
	negative := map[string]string{"int": "-5", "uint": "-5", "duration": "-5s", "float": "-5"}
	for _, f := range flags {
		key := strings.Join(f.command, " ") + " --" + f.name
		t.Run(key, func(t *testing.T) {
			t.Parallel()
			try := func(value string) {
				t.Helper()
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				cmd := exec.CommandContext(ctx, bin, append(slices.Clone(f.command), "--"+f.name, value)...)
				cmd.Env = append(cmd.Environ(), "DATABASE_URL=postgres://x@127.0.0.1:1/x?connect_timeout=1")
				out, err := cmd.CombinedOutput()
				var exit *exec.ExitError
				if !errors.As(err, &exit) || exit.ExitCode() == 0 || ctx.Err() != nil {
					t.Fatalf("--%s %s: %v, output %q; want a refusal at once", f.name, value, err, out)
				}
				if !bytes.Contains(out, []byte("-"+f.name+" ")) || bytes.Contains(out, []byte("cannot reach database")) {
					t.Errorf("--%s %s: output %q; want an error naming the flag, before the database", f.name, value, out)
				}
			}
			if !wholeRange[key] {
				try(huge[f.kind])
			}
			if _, ok := unboundedNegative[key]; !ok {
				try(negative[f.kind])
			}
		})
	}
}

// The bounds that matter most, with their messages.
func TestRunFlagBounds(t *testing.T) {
	t.Parallel()
	base := []string{"run", "--database-url", "postgres://x@127.0.0.1:1/x", "--dlt-url", "http://127.0.0.1:1"}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--db-max-conns", "100000"}, "--db-max-conns 100000: at most 1000 (ingest may hold half of them, the work needs the rest)"},
		{[]string{"--workers", "99999999999"}, "--workers 99999999999: at most 100000"},
		{[]string{"--max-connections", "10000000"}, "--max-connections 10000000: at most 100000"},
		{[]string{"--max-header-bytes", "100"}, "--max-header-bytes 100: at least 4096"},
		{[]string{"--max-body", "0"}, "--max-body 0: must be positive (default 10485760)"},
		{[]string{"--retention", "-1h"}, "--retention -1h0m0s: must not be negative"},
		{[]string{"--poll-interval", "1ns"}, "--poll-interval 1ns: at least 10ms"},
		{[]string{"--expiry-1", "0s"}, "--expiry-1 0s: must be positive (leave it unset for the default)"},
		{[]string{"--share-slack", "-1"}, "--share-slack -1: must not be negative"},
	} {
		var stdout, stderr bytes.Buffer
		code := realMain(t.Context(), append(slices.Clone(base), tt.args...), &stdout, &stderr)
		if code != 1 || !strings.Contains(stderr.String(), tt.want) || strings.Contains(stderr.String(), "cannot reach database") {
			t.Errorf("run %v: exit %d, stderr %q; want exit 1 and %q", tt.args, code, stderr.String(), tt.want)
		}
	}
	// From the environment, the variable is named.
	cmd := exec.Command(testbin.Path(t), base...)
	cmd.Env = append(cmd.Environ(), "BATCHCLAIM_WORKERS=99999999999")
	out, err := cmd.CombinedOutput()
	if !strings.Contains(string(out), "environment BATCHCLAIM_WORKERS 99999999999: at most 100000") {
		t.Errorf("BATCHCLAIM_WORKERS=99999999999: %v, output %q", err, out)
	}
}
