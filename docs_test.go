package batchclaim_test

// Checks that keep the documentation true to the code: the layer table of
// docs/architecture.md against the imports, the SQL the docs give an operator against a
// migrated database, and every metric, HTTP endpoint, statement name and test name the docs
// and the alert rules name against what exists. The release tags the changelog names exist
// too. The flags the docs name are checked by the program's module (cmd/batchclaim,
// docflags_test.go), which has the binary's help.
//
// Checked: README.md, docs/*.md, deploy/prometheus/alerts.yml, deploy/k8s/*.yaml and (for
// metrics) the dashboard. Not checked: docs/bench-log.md and CHANGELOG.md, whose dated entries
// keep the names of their day.
//
// SQL: a fenced block whose info string is `sql` is run, statement by statement, outside a
// transaction (so VACUUM runs); a block that is not meant to run is fenced with another info
// string (`sql-fragment`, say). An inline code span that starts with SELECT, VACUUM or ANALYZE
// and names a table in schema batchclaim is run too, its `...` placeholders read as NULL.

import (
	"bufio"
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/batchclaim/batchclaim/testkit/dbtest"
	"github.com/batchclaim/batchclaim/testkit/testutil"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

const modulePath = "github.com/batchclaim/batchclaim"

// docFiles are the files whose names are checked (see the top of this file).
func docFiles(t *testing.T) []string {
	t.Helper()
	files := []string{"README.md", "deploy/prometheus/alerts.yml"}
	for _, pat := range []string{"docs/*.md", "deploy/k8s/*.yaml"} {
		m, err := filepath.Glob(pat)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	out := files[:0]
	for _, f := range files {
		if f != filepath.Join("docs", "bench-log.md") {
			out = append(out, f)
		}
	}
	if len(out) < 10 {
		t.Fatalf("found only %d documentation files: %v", len(out), out)
	}
	return out
}

func readFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// span is a piece of a document: a fenced block or an inline code span, with the line it
// starts on.
type span struct {
	file, info, text string
	line             int
}

func (s span) String() string { return fmt.Sprintf("%s:%d: %q", s.file, s.line, s.text) }

var reInline = regexp.MustCompile("`([^`]+)`")

// markdownSpans splits a Markdown (or YAML) file into its fenced code blocks and the inline
// code spans outside them. An inline span may cross a line break; its whitespace is folded.
func markdownSpans(file, text string) (blocks, inline []span) {
	lines := strings.Split(text, "\n")
	var prose strings.Builder
	proseLine := []int{} // line number of each line written to prose
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		trimmed := strings.TrimSpace(l)
		if strings.HasPrefix(trimmed, "```") {
			info := strings.Fields(strings.TrimPrefix(trimmed, "```"))
			b := span{file: file, line: i + 2}
			if len(info) > 0 {
				b.info = info[0]
			}
			var body []string
			for i++; i < len(lines) && !strings.HasPrefix(strings.TrimSpace(lines[i]), "```"); i++ {
				body = append(body, lines[i])
			}
			b.text = strings.Join(body, "\n")
			blocks = append(blocks, b)
			prose.WriteString("\n")
			proseLine = append(proseLine, i+1)
			continue
		}
		prose.WriteString(l + "\n")
		proseLine = append(proseLine, i+1)
	}
	p := prose.String()
	for _, m := range reInline.FindAllStringSubmatchIndex(p, -1) {
		line := proseLine[min(strings.Count(p[:m[0]], "\n"), len(proseLine)-1)]
		inline = append(inline, span{file: file, line: line, text: strings.Join(strings.Fields(p[m[2]:m[3]]), " ")})
	}
	return blocks, inline
}

func docSpans(t *testing.T) (blocks, inline []span) {
	t.Helper()
	for _, f := range docFiles(t) {
		b, in := markdownSpans(f, readFile(t, f))
		blocks, inline = append(blocks, b...), append(inline, in...)
	}
	return blocks, inline
}

// goSources returns every .go file of the repository (both modules, generated code
// included), path -> contents; tests is whether _test.go files are included.
func goSources(t *testing.T, tests bool) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != "." && (strings.HasPrefix(n, ".") || n == "testdata" || n == "tools") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || (!tests && strings.HasSuffix(path, "_test.go")) {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		out[path] = string(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) < 100 {
		t.Fatalf("found only %d Go files", len(out))
	}
	return out
}

// --- The layer table ---------------------------------------------------------------------

// listImports lists the packages of the module in dir, each with the repository's packages
// its non-test files import, by path in the repository ("" for the root).
func listImports(t *testing.T, dir string) map[string][]string {
	t.Helper()
	cmd := exec.Command(testutil.GoTool(t), "list", "-e", "-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}", "./...")
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list in %s: %v\n%s", dir, err, stderr.String())
	}
	pkgs := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		pkg, ok := repoPath(f[0])
		if !ok {
			t.Fatalf("go list in %s lists %s, outside %s", dir, f[0], modulePath)
		}
		pkgs[pkg] = nil
		for _, imp := range f[1:] {
			if p, ok := repoPath(imp); ok {
				pkgs[pkg] = append(pkgs[pkg], p)
			}
		}
	}
	return pkgs
}

// repoPath turns an import path of this repository into its path in the repository.
func repoPath(importPath string) (string, bool) {
	if importPath == modulePath {
		return "", true
	}
	p, ok := strings.CutPrefix(importPath, modulePath+"/")
	return p, ok
}

type layer struct {
	name     string
	line     int
	packages []string // paths in the repository; "" is the root; "x/..." is x's subtree
}

// layerTable reads the table under "## Layers" in docs/architecture.md.
func layerTable(t *testing.T) []layer {
	t.Helper()
	const file = "docs/architecture.md"
	sc := bufio.NewScanner(strings.NewReader(readFile(t, file)))
	sc.Buffer(nil, 1<<20)
	var layers []layer
	in, n := false, 0
	for sc.Scan() {
		n++
		l := sc.Text()
		switch {
		case strings.HasPrefix(l, "## "):
			in = l == "## Layers"
		case in && strings.HasPrefix(l, "| ") && !strings.HasPrefix(l, "| Layer ") && !strings.HasPrefix(l, "| ---"):
			cells := strings.Split(l, "|")
			if len(cells) < 4 {
				t.Fatalf("%s:%d: a layer row without a Packages cell: %q", file, n, l)
			}
			ly := layer{name: strings.TrimSpace(cells[1]), line: n}
			for _, m := range reInline.FindAllStringSubmatch(cells[2], -1) {
				p := m[1]
				if p == "batchclaim" {
					p = ""
				}
				ly.packages = append(ly.packages, p)
			}
			if len(ly.packages) == 0 {
				t.Fatalf("%s:%d: layer %s names no package", file, n, ly.name)
			}
			layers = append(layers, ly)
		}
	}
	if len(layers) < 5 {
		t.Fatalf("%s: found %d layers under \"## Layers\"; is the table there?", file, len(layers))
	}
	return layers
}

func matches(entry, pkg string) bool {
	if prefix, ok := strings.CutSuffix(entry, "/..."); ok {
		return strings.HasPrefix(pkg, prefix+"/")
	}
	return entry == pkg
}

func shown(p string) string {
	if p == "" {
		return "batchclaim (the root)"
	}
	return p
}

// checkLayers returns what is wrong between the layer table and the packages (path ->
// the repository's packages it imports).
func checkLayers(layers []layer, pkgs map[string][]string) []string {
	var problems []string
	layerOf := map[string]int{}
	used := map[string]bool{}
	names := make([]string, 0, len(pkgs))
	for p := range pkgs {
		names = append(names, p)
	}
	sort.Strings(names)
	for _, p := range names {
		var where []string
		for i, ly := range layers {
			for _, e := range ly.packages {
				if matches(e, p) {
					where = append(where, ly.name)
					layerOf[p] = i
					used[e] = true
				}
			}
		}
		switch len(where) {
		case 0:
			problems = append(problems, fmt.Sprintf("package %s has no place in the layer table: add it to a layer at or below every layer it imports", shown(p)))
		case 1:
		default:
			problems = append(problems, fmt.Sprintf("package %s is in the layer table more than once: %v", shown(p), where))
		}
	}
	for _, ly := range layers {
		for _, e := range ly.packages {
			if !used[e] {
				problems = append(problems, fmt.Sprintf("line %d: layer %s names %s, which is no package of the repository", ly.line, ly.name, shown(e)))
			}
		}
	}
	for _, p := range names {
		i, ok := layerOf[p]
		if !ok {
			continue
		}
		for _, imp := range pkgs[p] {
			if j, ok := layerOf[imp]; ok && j > i {
				problems = append(problems, fmt.Sprintf("%s (layer %s) imports %s (layer %s, lower in the table): move one of them, or change the import",
					shown(p), layers[i].name, shown(imp), layers[j].name))
			}
		}
	}
	return problems
}

// Every package of both modules has a place in the layer table, every package the table
// names exists, and no package imports one of a layer below its own.
func TestArchitectureLayers(t *testing.T) {
	t.Parallel()
	layers := layerTable(t)
	pkgs := listImports(t, ".")
	for p, imps := range listImports(t, filepath.Join("cmd", "batchclaim")) {
		pkgs[p] = imps
	}
	if _, ok := pkgs["cmd/batchclaim"]; !ok {
		t.Fatalf("go list did not list the program's module: %v", pkgs)
	}
	for _, p := range checkLayers(layers, pkgs) {
		t.Error("docs/architecture.md: " + p)
	}

	// River's benchmark is a module apart that does not import batchclaim (the table leaves
	// it out for that reason).
	gomod := readFile(t, filepath.Join("bench", "river", "go.mod"))
	for _, l := range strings.Split(gomod, "\n") {
		if f := strings.Fields(strings.TrimPrefix(strings.TrimSpace(l), "require")); len(f) > 0 && f[0] == modulePath {
			t.Errorf("bench/river/go.mod requires %s: River's side must not depend on batchclaim", modulePath)
		}
	}
}

// The layer check reports an import of a lower layer, a package the table lacks, a name that
// is no package and a package listed twice, and nothing in a table that fits.
func TestLayerCheckCatches(t *testing.T) {
	t.Parallel()
	layers := []layer{
		{name: "Top", line: 1, packages: []string{"", "seam"}},
		{name: "Middle", line: 2, packages: []string{"engine"}},
		{name: "Bottom", line: 3, packages: []string{"cmd/x", "cmd/x/..."}},
	}
	good := map[string][]string{"": nil, "seam": {""}, "engine": {"seam", ""}, "cmd/x": {"engine", "cmd/x/internal/y"}, "cmd/x/internal/y": {"seam"}}
	if got := checkLayers(layers, good); len(got) != 0 {
		t.Errorf("a table that fits: %v", got)
	}
	bad := map[string][]string{"": nil, "seam": {"engine"}, "engine": nil, "cmd/x": nil, "stray": nil}
	layers = append(layers, layer{name: "Extra", line: 4, packages: []string{"gone", "engine"}})
	got := strings.Join(checkLayers(layers, bad), "\n")
	for _, want := range []string{
		"seam (layer Top) imports engine (layer Extra, lower in the table)",
		"package stray has no place in the layer table",
		"line 4: layer Extra names gone, which is no package",
		"package engine is in the layer table more than once",
		"line 3: layer Bottom names cmd/x/..., which is no package",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in:\n%s", want, got)
		}
	}
	if !matches("cmd/x/...", "cmd/x/internal/y") || matches("cmd/x/...", "cmd/x") || matches("a", "a/b") {
		t.Error("matches: subtree or exact match wrong")
	}
}

// --- SQL ---------------------------------------------------------------------------------

var reRunnableInline = regexp.MustCompile(`^(SELECT|VACUUM|ANALYZE) .*\bbatchclaim\.[a-z_]+`)

// splitStatements splits a block at each semicolon that ends a line.
func splitStatements(block string) []string {
	var out []string
	var cur strings.Builder
	for _, l := range strings.Split(block, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "--") {
			continue
		}
		cur.WriteString(l + "\n")
		if strings.HasSuffix(strings.TrimSpace(l), ";") {
			out = append(out, strings.TrimSpace(cur.String()))
			cur.Reset()
		}
	}
	if s := strings.TrimSpace(cur.String()); s != "" {
		out = append(out, s)
	}
	return out
}

// The SQL the docs give an operator runs as written against a migrated database.
func TestDocsSQLRuns(t *testing.T) {
	t.Parallel()
	blocks, inline := docSpans(t)
	type stmt struct {
		at  span
		sql string
	}
	var stmts []stmt
	nblocks, ninline := 0, 0
	for _, b := range blocks {
		if b.info != "sql" {
			continue
		}
		nblocks++
		for _, s := range splitStatements(b.text) {
			stmts = append(stmts, stmt{b, s})
		}
	}
	for _, s := range inline {
		if reRunnableInline.MatchString(s.text) {
			ninline++
			stmts = append(stmts, stmt{s, strings.ReplaceAll(s.text, "...", "NULL")})
		}
	}
	if nblocks < 1 || ninline < 3 {
		t.Fatalf("found %d sql blocks and %d runnable inline statements; is the extraction right?", nblocks, ninline)
	}

	conn, err := pgx.Connect(t.Context(), dbtest.NewDB(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	for _, s := range stmts {
		if _, err := conn.Exec(t.Context(), s.sql); err != nil {
			t.Errorf("%s:%d: %s\n\tfails on a migrated database: %v", s.at.file, s.at.line, s.sql, err)
		}
	}
	t.Logf("ran %d statements from %d sql blocks and %d inline spans", len(stmts), nblocks, ninline)
}

// --- Metrics -------------------------------------------------------------------------------

var (
	reMetricDecl = regexp.MustCompile(`(?:Name:\s*|NewDesc\(\s*|stat\(\s*)"(batchclaim_[a-z0-9_]+)"`)
	reMetricUse  = regexp.MustCompile(`\bbatchclaim_[a-z0-9_]+`)
	reRole       = regexp.MustCompile(`(?i)CREATE ROLE (batchclaim_[a-z0-9_]+)`)
)

// Every batchclaim_* name the docs, the alert rules and the dashboard use is a metric some
// code registers, or one of the other names of that shape: a role of deploy/roles.sql, or a
// function or notification channel of the migrations.
func TestDocsNameMetricsThatExist(t *testing.T) {
	t.Parallel()
	metrics := map[string]bool{}
	for _, src := range goSources(t, false) {
		for _, m := range reMetricDecl.FindAllStringSubmatch(src, -1) {
			metrics[m[1]] = true
		}
	}
	if len(metrics) < 30 {
		t.Fatalf("found only %d registered metrics: %v", len(metrics), metrics)
	}
	other := map[string]string{}
	for _, m := range reRole.FindAllStringSubmatch(readFile(t, "deploy/roles.sql"), -1) {
		other[m[1]] = "a role of deploy/roles.sql"
	}
	ups, err := filepath.Glob("migrations/*.up.sql")
	if err != nil || len(ups) == 0 {
		t.Fatalf("migrations: %v", err)
	}
	for _, f := range ups {
		for _, n := range reMetricUse.FindAllString(readFile(t, f), -1) {
			other[n] = "a name in the migrations"
		}
	}

	known := func(n string) bool {
		if metrics[n] || other[n] != "" {
			return true
		}
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if base, ok := strings.CutSuffix(n, suffix); ok && metrics[base] {
				return true
			}
		}
		return false
	}
	files := append(docFiles(t), "deploy/grafana/batchclaim.json")
	checked := 0
	for _, f := range files {
		for i, l := range strings.Split(readFile(t, f), "\n") {
			for _, n := range reMetricUse.FindAllString(l, -1) {
				checked++
				if !known(n) {
					t.Errorf("%s:%d: %s is no metric the code registers (nor a role or a name in the migrations)", f, i+1, n)
				}
			}
		}
	}
	if checked < 50 {
		t.Fatalf("checked only %d names", checked)
	}
}

// --- HTTP endpoints ------------------------------------------------------------------------

var (
	reRoute    = regexp.MustCompile(`\.(?:HandleFunc|Handle)\(\s*"([^"]*)"`)
	reEndpoint = regexp.MustCompile(`^(?:(GET|POST|PUT|DELETE|PATCH|HEAD) )?(/\S*)$`)
	// First segments of file-system paths, which the docs name in code spans too.
	fsRoots = map[string]bool{"etc": true, "var": true, "usr": true, "tmp": true, "proc": true, "dev": true,
		"run": true, "home": true, "lib": true, "opt": true, "bin": true, "sys": true, "srv": true}
)

type route struct {
	method string
	segs   []string
	tree   bool // ends in "/": every path below it
	end    bool // ends in {$}: this path only
}

func parseRoute(pattern string) (route, bool) {
	var r route
	if m, p, ok := strings.Cut(pattern, " "); ok {
		r.method, pattern = m, p
	}
	if !strings.HasPrefix(pattern, "/") {
		return r, false
	}
	p := strings.TrimPrefix(pattern, "/")
	if strings.HasSuffix(p, "{$}") {
		r.end, p = true, strings.TrimSuffix(p, "{$}")
	}
	if p == "" || strings.HasSuffix(p, "/") {
		r.tree = !r.end
		p = strings.TrimSuffix(p, "/")
	}
	if p != "" {
		r.segs = strings.Split(p, "/")
	}
	return r, true
}

// serves says whether r answers method on the path segs; prefix: any path below segs will do.
func (r route) serves(method string, segs []string, prefix bool) bool {
	if method != "" && r.method != "" && method != r.method {
		return false
	}
	wild := func(s string) bool { return strings.HasPrefix(s, "{") && strings.HasSuffix(s, "}") }
	for i, s := range segs {
		if i >= len(r.segs) {
			return r.tree
		}
		if rs := r.segs[i]; rs != s && !wild(rs) && !wild(s) && strings.ToUpper(s) != s {
			return false
		}
	}
	if prefix {
		return len(r.segs) > len(segs) || r.tree
	}
	return len(segs) == len(r.segs) || (r.tree && len(segs) >= len(r.segs))
}

// Every HTTP endpoint the docs name in a code span (`/readyz`, `POST /batches?service_id=S`,
// `/api/...`) is served by some handler the code registers.
func TestDocsNameEndpointsThatExist(t *testing.T) {
	t.Parallel()
	var routes []route
	for _, src := range goSources(t, false) {
		for _, m := range reRoute.FindAllStringSubmatch(src, -1) {
			if r, ok := parseRoute(m[1]); ok {
				routes = append(routes, r)
			}
		}
	}
	if len(routes) < 20 {
		t.Fatalf("found only %d routes", len(routes))
	}
	_, inline := docSpans(t)
	checked := 0
	for _, s := range inline {
		m := reEndpoint.FindStringSubmatch(s.text)
		if m == nil || strings.HasPrefix(m[2], "/#") {
			continue // not a path, or one of the status page's own (client-side) views
		}
		path, _, _ := strings.Cut(m[2], "?")
		path, prefix := strings.CutSuffix(path, "...")
		var segs []string
		if p := strings.Trim(path, "/"); p != "" {
			segs = strings.Split(p, "/")
		}
		if len(segs) > 0 && fsRoots[segs[0]] {
			continue
		}
		checked++
		found := false
		for _, r := range routes {
			if r.serves(m[1], segs, prefix) {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("%s:%d: %s: no handler the code registers serves it", s.file, s.line, s.text)
		}
	}
	if checked < 40 {
		t.Fatalf("checked only %d endpoints", checked)
	}
}

// The route matcher accepts what the mux would serve and refuses what it would not.
func TestEndpointMatcher(t *testing.T) {
	t.Parallel()
	r := func(p string) route { x, _ := parseRoute(p); return x }
	for _, tt := range []struct {
		route, method, path string
		prefix, want        bool
	}{
		{"GET /readyz", "", "readyz", false, true},
		{"GET /readyz", "POST", "readyz", false, false},
		{"GET /readyz", "", "ready", false, false},
		{"POST /api/batches/{seq}/retry", "POST", "api/batches/{seq}/retry", false, true},
		{"POST /api/batches/{seq}/retry", "POST", "api/batches/SEQ/retry", false, true},
		{"GET /api/batches/{seq}", "", "api", true, true},
		{"GET /debug/pprof/", "", "debug/pprof/heap", false, true},
		{"GET /{$}", "", "", false, true},
		{"GET /{$}", "", "x", false, false},
		{"/heartbeat", "POST", "heartbeat", false, true},
	} {
		var segs []string
		if tt.path != "" {
			segs = strings.Split(tt.path, "/")
		}
		if got := r(tt.route).serves(tt.method, segs, tt.prefix); got != tt.want {
			t.Errorf("%q serves %s %q (prefix %v) = %v, want %v", tt.route, tt.method, tt.path, tt.prefix, got, tt.want)
		}
	}
}

// --- Statement and test names ------------------------------------------------------------

var (
	reQueryName = regexp.MustCompile(`(?m)^-- name: ([A-Za-z0-9]+)`)
	reCamel     = regexp.MustCompile(`^([A-Z][a-z]+)[A-Z][A-Za-z0-9]*$`)
)

// Every statement name (BatchesMarkInflight) and test name (TestFaults) the docs give is a
// statement of queries/*.sql or an identifier of the Go code: a name the docs keep after a
// rename points a reader at nothing.
func TestDocsNameStatementsAndTestsThatExist(t *testing.T) {
	t.Parallel()
	queries := map[string]bool{}
	prefixes := map[string]bool{"Test": true}
	files, err := filepath.Glob("queries/*.sql")
	if err != nil || len(files) == 0 {
		t.Fatalf("queries: %v", err)
	}
	for _, f := range files {
		for _, m := range reQueryName.FindAllStringSubmatch(readFile(t, f), -1) {
			queries[m[1]] = true
			if c := reCamel.FindStringSubmatch(m[1]); c != nil {
				prefixes[c[1]] = true
			}
		}
	}
	idents := map[string]bool{}
	fset := token.NewFileSet()
	for path, src := range goSources(t, true) {
		f, err := parser.ParseFile(fset, path, src, parser.SkipObjectResolution)
		if err != nil {
			continue // a file that does not parse fails its own package's build
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if id, ok := n.(*ast.Ident); ok {
				idents[id.Name] = true
			}
			return true
		})
	}
	_, inline := docSpans(t)
	checked := 0
	for _, s := range inline {
		c := reCamel.FindStringSubmatch(s.text)
		if c == nil || !prefixes[c[1]] {
			continue
		}
		checked++
		if !queries[s.text] && !idents[s.text] {
			t.Errorf("%s:%d: %s is neither a statement of queries/*.sql nor a name in the Go code", s.file, s.line, s.text)
		}
	}
	if checked < 30 {
		t.Fatalf("checked only %d names", checked)
	}
}

// --- Release tags --------------------------------------------------------------------------

var (
	reRelease = regexp.MustCompile(`(?m)^## (v[0-9]+\.[0-9]+\.[0-9]+) \(`)
	reSchema  = regexp.MustCompile(`Schema version ([0-9]+)`)
)

func git(t *testing.T, args ...string) (string, error) {
	t.Helper()
	out, err := exec.Command("git", args...).Output()
	return strings.TrimSpace(string(out)), err
}

// Every release CHANGELOG.md lists has its annotated tag, on a commit whose schema is the
// version the changelog gives for it.
func TestReleaseTagsExist(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git command")
	}
	if out, err := git(t, "rev-parse", "--is-inside-work-tree"); err != nil || out != "true" {
		t.Skip("not a git checkout (an exported tree has no tags)")
	}
	if out, _ := git(t, "rev-parse", "--is-shallow-repository"); out == "true" {
		t.Skip("a shallow clone: its tags may not have been fetched")
	}
	// A clone made without tags (--no-tags, or a copy of one branch) has none at all: say so
	// rather than fail. One with tags must have every release's.
	if out, err := git(t, "tag", "--list"); err != nil || out == "" {
		t.Skip("the clone has no tags at all (git fetch --tags brings them)")
	}
	changelog := readFile(t, "CHANGELOG.md")
	releases := reRelease.FindAllStringSubmatchIndex(changelog, -1)
	if len(releases) == 0 {
		t.Fatal("CHANGELOG.md lists no release (## vX.Y.Z (date))")
	}
	for i, m := range releases {
		tag := changelog[m[2]:m[3]]
		end := len(changelog)
		if i+1 < len(releases) {
			end = releases[i+1][0]
		}
		if kind, err := git(t, "cat-file", "-t", "refs/tags/"+tag); err != nil || kind != "tag" {
			t.Errorf("CHANGELOG.md lists %s, but the repository has no annotated tag %s (git tag -a %s COMMIT; git fetch --tags if it was cloned without them)", tag, tag, tag)
			continue
		}
		s := reSchema.FindStringSubmatch(changelog[m[0]:end])
		if s == nil {
			continue
		}
		want, _ := strconv.Atoi(s[1])
		files, err := git(t, "ls-tree", "--name-only", tag+"^{commit}", "migrations/")
		if err != nil {
			t.Fatalf("git ls-tree %s migrations/: %v", tag, err)
		}
		got := 0
		for _, f := range strings.Fields(files) {
			if n, err := strconv.Atoi(strings.SplitN(filepath.Base(f), "_", 2)[0]); err == nil {
				got = max(got, n)
			}
		}
		if got != want {
			t.Errorf("tag %s: its migrations end at %d, but CHANGELOG.md gives schema version %d", tag, got, want)
		}
	}
}
