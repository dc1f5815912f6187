package bench

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// Every row of scenarios has a name of its own, one line of help, a run function and flags
// that bench defines; every flag bench defines is a common one or read by some scenario.
func TestScenarioTable(t *testing.T) {
	t.Parallel()
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	var s settings
	s.define(fs)
	for _, name := range commonFlags {
		if fs.Lookup(name) == nil {
			t.Errorf("common flag --%s is not defined", name)
		}
	}
	read := map[string]bool{}
	seen := map[string]bool{}
	for _, sc := range scenarios {
		if sc.name == "" || sc.name == "all" || seen[sc.name] {
			t.Errorf("scenario %q: want a name of its own, not empty nor all", sc.name)
		}
		seen[sc.name] = true
		if strings.TrimSpace(sc.help) == "" || strings.Contains(sc.help, "\n") {
			t.Errorf("scenario %s: help %q, want one line", sc.name, sc.help)
		}
		if sc.run == nil {
			t.Errorf("scenario %s has no run function", sc.name)
		}
		if len(sc.flags) == 0 {
			t.Errorf("scenario %s reads no flag of its own", sc.name)
		}
		for _, f := range sc.flags {
			if fs.Lookup(f) == nil {
				t.Errorf("scenario %s reads --%s, which bench does not define", sc.name, f)
			}
			if slices.Contains(commonFlags, f) {
				t.Errorf("scenario %s lists the common flag --%s", sc.name, f)
			}
			read[f] = true
		}
	}
	fs.VisitAll(func(f *flag.Flag) {
		if !read[f.Name] && !slices.Contains(commonFlags, f.Name) {
			t.Errorf("--%s is neither a common flag nor read by any scenario", f.Name)
		}
	})
}

var reFlag = regexp.MustCompile(`--([a-z0-9-]+)`)

// bench --help lists every scenario of the table, in its order, with its help and then the
// flags it reads; the synopsis and --scenario's usage name every scenario too.
func TestBenchHelpListsScenarios(t *testing.T) {
	t.Parallel()
	var stdout, stderr bytes.Buffer
	if err := Command(t.Context(), []string{"--help"}, &stdout, &stderr); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("bench --help: %v, want flag.ErrHelp", err)
	}
	help := stderr.String()
	lines := strings.Split(help, "\n")
	synopsis := lines[0]
	at := -1
	for _, sc := range scenarios {
		if !strings.Contains(synopsis, "|"+sc.name+"|") && !strings.Contains(synopsis, " "+sc.name+"|") {
			t.Errorf("synopsis %q lacks %s", synopsis, sc.name)
		}
		re := regexp.MustCompile(`^  ` + regexp.QuoteMeta(sc.name) + ` +` + regexp.QuoteMeta(sc.help) + `$`)
		i := slices.IndexFunc(lines, re.MatchString)
		if i < 0 {
			t.Errorf("bench --help has no line for %s with its help %q:\n%s", sc.name, sc.help, help)
			continue
		}
		if i < at {
			t.Errorf("bench --help lists %s out of the table's order", sc.name)
		}
		at = i
		// The scenario's flags: the lines under its own that start with "flags:" or continue them.
		var flags []string
		for _, l := range lines[i+1:] {
			l = strings.TrimSpace(l)
			if !strings.HasPrefix(l, "flags:") && !strings.HasPrefix(l, "--") {
				break
			}
			for _, m := range reFlag.FindAllStringSubmatch(l, -1) {
				flags = append(flags, m[1])
			}
		}
		if !slices.Equal(flags, sc.flags) {
			t.Errorf("bench --help lists %v as the flags of %s; the table says %v", flags, sc.name, sc.flags)
		}
	}
	if !strings.Contains(help, strings.Join(append(scenarioNames(), "all"), " | ")) {
		t.Errorf("--scenario's usage does not list every scenario:\n%s", help)
	}
	if stdout.Len() > 0 {
		t.Errorf("bench --help printed %q on stdout", stdout.String())
	}
}

// An unknown scenario is an error, before any database is used, that names every scenario
// of the table and all.
func TestBenchUnknownScenario(t *testing.T) {
	t.Parallel()
	err := Command(t.Context(), []string{"--scenario", "river"}, io.Discard, io.Discard)
	if err == nil {
		t.Fatal("bench --scenario river: no error")
	}
	want := `--scenario "river": want ` + strings.Join(scenarioNames(), ", ") + " or all"
	if err.Error() != want {
		t.Errorf("bench --scenario river: %q, want %q", err, want)
	}
	for _, name := range scenarioNames() {
		if _, err := choose(name); err != nil {
			t.Errorf("choose(%q): %v", name, err)
		}
	}
	if all, err := choose("all"); err != nil || len(all) != len(scenarios) {
		t.Errorf("choose(all): %d scenarios, %v; want the %d of the table", len(all), err, len(scenarios))
	}
}
