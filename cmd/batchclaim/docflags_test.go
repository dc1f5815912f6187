package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// Flags the docs name that belong to other programs, each with the program.
var foreignFlags = map[string]string{
	"from-literal":   "kubectl create secret (deploy/k8s)",
	"from-file":      "kubectl create secret (deploy/k8s)",
	"num-total-jobs": "River's own benchmark, riverbench (docs/performance.md)",
}

var (
	reHelpFlag = regexp.MustCompile(`(?m)^\s+-{1,2}([a-z][a-z0-9-]*)\b`)
	reUsage    = regexp.MustCompile(`Usage: batchclaim [a-z-]+ ([a-z-]+(?:\|[a-z-]+)+)`)
	reDocFlag  = regexp.MustCompile(`(?:^|[^A-Za-z0-9_-])--([a-z][a-z0-9-]*)`)
	reRiverArg = regexp.MustCompile(`fs\.[A-Za-z0-9]+\((?:&[A-Za-z.]+, )?"([a-z][a-z0-9-]*)"`)
)

// helpFlags returns every flag the binary's help lists, for every command and subcommand
// (`election run`, `heartbeat event-types`, ...), each with the commands that have it.
func helpFlags(t *testing.T) map[string][]string {
	t.Helper()
	flags := map[string][]string{"help": {"every command"}}
	help := func(args ...string) string {
		var out bytes.Buffer
		realMain(t.Context(), append(args, "--help"), &out, &out)
		return out.String()
	}
	for name := range commands {
		text := help(name)
		invocations := [][]string{{name}}
		if m := reUsage.FindStringSubmatch(text); m != nil {
			for _, sub := range strings.Split(m[1], "|") {
				invocations = append(invocations, []string{name, sub})
			}
		}
		for i, inv := range invocations {
			if i > 0 {
				text = help(inv...)
			}
			for _, m := range reHelpFlag.FindAllStringSubmatch(text, -1) {
				flags[m[1]] = append(flags[m[1]], strings.Join(inv, " "))
			}
		}
	}
	return flags
}

// Every flag the docs, the alert rules and the Kubernetes manifest name (`--drop-idle-after`)
// is listed by the help of some command of the binary, or of River's benchmark in bench/river
// (`--tuning`), or is one of foreignFlags. docs/bench-log.md and CHANGELOG.md keep the flags of
// their day and are not checked.
func TestDocsNameFlagsThatExist(t *testing.T) {
	t.Parallel()
	flags := helpFlags(t)
	for _, f := range []string{"database-url", "drop-idle-after", "roles", "scenario", "cluster", "webhook-url"} {
		if len(flags[f]) == 0 {
			t.Fatalf("the help lists no --%s: is it read right? (%d flags found)", f, len(flags))
		}
	}
	river, err := os.ReadFile(filepath.Join("..", "..", "bench", "river", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range reRiverArg.FindAllStringSubmatch(string(river), -1) {
		flags[m[1]] = append(flags[m[1]], "bench/river")
	}

	root := filepath.Join("..", "..")
	files := []string{filepath.Join(root, "README.md"), filepath.Join(root, "deploy", "prometheus", "alerts.yml")}
	for _, pat := range []string{filepath.Join(root, "docs", "*.md"), filepath.Join(root, "deploy", "k8s", "*.yaml")} {
		m, err := filepath.Glob(pat)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	checked := map[string]bool{}
	for _, f := range files {
		if filepath.Base(f) == "bench-log.md" {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, f)
		for i, line := range strings.Split(string(b), "\n") {
			for _, m := range reDocFlag.FindAllStringSubmatch(line, -1) {
				name := m[1]
				checked[name] = true
				if len(flags[name]) == 0 && foreignFlags[name] == "" {
					t.Errorf("%s:%d: --%s is a flag of no command (batchclaim COMMAND --help lists them)", rel, i+1, name)
				}
			}
		}
	}
	if len(checked) < 50 {
		t.Fatalf("the docs name only %d distinct flags; are they read right?", len(checked))
	}
	var unused []string
	for f := range foreignFlags {
		if !checked[f] {
			unused = append(unused, f)
		}
	}
	sort.Strings(unused)
	if len(unused) > 0 {
		t.Errorf("foreignFlags lists %v, which no doc names any more: drop them", unused)
	}
}
