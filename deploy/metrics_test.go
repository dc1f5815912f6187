package deploy_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/batchclaim/batchclaim/claims"
	"github.com/batchclaim/batchclaim/dlt"
	"github.com/batchclaim/batchclaim/dlt/dltsim"
	"github.com/batchclaim/batchclaim/node"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
	"github.com/batchclaim/batchclaim/testkit/testutil"
)

// synthetic are series Prometheus itself adds to every scrape.
var synthetic = map[string]bool{"up": true}

// addedLabels are labels Prometheus attaches to every scraped series.
var addedLabels = map[string]bool{"instance": true, "job": true}

// Every metric, and every label in a selector, that the dashboard and the alert rules name is
// exported by a running instance (gathered from its registry after it did some work).
func TestDashboardAndRulesNameExportedMetrics(t *testing.T) {
	exported := runningInstanceMetrics(t)
	uses := map[string]map[string]string{} // metric -> label used in its selectors -> file
	where := map[string]string{}           // metric -> first file naming it
	for _, src := range []struct {
		file  string
		exprs func(*testing.T, string) []string
	}{
		{"grafana/batchclaim.json", dashboardExprs},
		{"prometheus/alerts.yml", ruleExprs},
	} {
		exprs := src.exprs(t, src.file)
		if len(exprs) < 10 {
			t.Fatalf("%s: found only %d expressions; is the file parsed right?", src.file, len(exprs))
		}
		for _, e := range exprs {
			for m, labels := range metricNames(e) {
				if uses[m] == nil {
					uses[m] = map[string]string{}
					where[m] = src.file
				}
				for _, l := range labels {
					uses[m][l] = src.file
				}
			}
		}
	}
	if len(uses) < 12 {
		t.Fatalf("the dashboard and the rules name only %d metrics: %v", len(uses), keys(uses))
	}
	daemon := daemonOnly(t)
	for m, labels := range uses {
		if synthetic[m] {
			continue
		}
		if daemon[m] {
			continue
		}
		fam, ok := lookup(exported, m)
		if !ok {
			t.Errorf("%s names %s, which an instance does not export", where[m], m)
			continue
		}
		for l, file := range labels {
			if !addedLabels[l] && !fam.labels[l] && !(l == "le" && fam.histogram) {
				t.Errorf("%s selects %s by label %q, which it does not have (has %v)", file, m, l, keys(fam.labels))
			}
		}
	}
	t.Logf("checked %d metric names against %d exported families", len(uses), len(exported))
}

// The extractor finds metric names and selector labels, and skips functions, aggregations,
// grouping labels, durations and strings: the check above cannot pass by finding nothing.
func TestMetricNames(t *testing.T) {
	got := metricNames(`sum by (code, instance) (rate(foo_total{code=~"429|503", job="x"}[5m])) / on(instance) group_left bar_seconds_bucket` +
		` > 0.5 and (vector(0) or histogram_quantile(0.99, baz{le!=""})) unless label_values(qux, instance)`)
	want := map[string][]string{"foo_total": {"code", "job"}, "bar_seconds_bucket": nil, "baz": {"le"}, "qux": {"instance"}}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for m, labels := range want {
		g, ok := got[m]
		if !ok || !slices.Equal(sorted(g), labels) {
			t.Errorf("%s: got %v (found %v), want %v", m, g, ok, labels)
		}
	}
}

// daemonOnly are the metrics the run command registers besides a node's (the statement
// counter on its pool's connections, the start guard's): their names as its source declares
// them, so that a name no code declares still fails the check above.
func daemonOnly(t *testing.T) map[string]bool {
	t.Helper()
	files, err := filepath.Glob("../cmd/batchclaim/*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("the run command's source: %v", err)
	}
	names := map[string]bool{}
	re := regexp.MustCompile(`Name:\s*"(batchclaim_[a-z0-9_]+)"`)
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range re.FindAllSubmatch(b, -1) {
			names[string(m[1])] = true
		}
	}
	return names
}

type family struct {
	labels    map[string]bool
	histogram bool
}

func lookup(exported map[string]family, name string) (family, bool) {
	if f, ok := exported[name]; ok {
		return f, true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok {
			if f, ok := exported[base]; ok && f.histogram {
				return f, true
			}
		}
	}
	return family{}, false
}

var (
	reString   = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	reGrouping = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	reRange    = regexp.MustCompile(`\[[^\]]*\]`)
	reLabelVal = regexp.MustCompile(`label_values\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)\s*,\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\)`)
	reIdent    = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)
	reMatcher  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)`)
	keywords   = map[string]bool{"and": true, "or": true, "unless": true, "bool": true, "offset": true,
		"group_left": true, "group_right": true, "by": true, "without": true, "on": true, "ignoring": true, "inf": true, "nan": true}
)

// metricNames returns the metric names a PromQL expression (or a Grafana label_values query)
// selects, each with the label names its selectors match on.
func metricNames(expr string) map[string][]string {
	out := map[string][]string{}
	add := func(m string, labels ...string) {
		if _, ok := out[m]; !ok {
			out[m] = nil
		}
		for _, l := range labels {
			if !slices.Contains(out[m], l) {
				out[m] = append(out[m], l)
			}
		}
	}
	for _, lv := range reLabelVal.FindAllStringSubmatch(expr, -1) {
		add(lv[1], lv[2])
	}
	expr = reLabelVal.ReplaceAllString(expr, " ")
	// Selectors first: their matchers' strings may hold anything.
	var b strings.Builder
	for len(expr) > 0 {
		open := strings.IndexByte(expr, '{')
		if open < 0 {
			b.WriteString(expr)
			break
		}
		end := open + 1
		for depth, inStr := 1, false; end < len(expr) && depth > 0; end++ {
			switch c := expr[end]; {
			case c == '\\' && inStr:
				end++
			case c == '"':
				inStr = !inStr
			case c == '{' && !inStr:
				depth++
			case c == '}' && !inStr:
				depth--
			}
		}
		before := expr[:open]
		body := reString.ReplaceAllString(expr[open+1:end-1], `""`)
		idents := reIdent.FindAllStringIndex(before, -1)
		if n := len(idents); n > 0 && strings.TrimSpace(before[idents[n-1][1]:]) == "" {
			m := before[idents[n-1][0]:idents[n-1][1]]
			var labels []string
			for _, lm := range reMatcher.FindAllStringSubmatch(body, -1) {
				labels = append(labels, lm[1])
			}
			add(m, labels...)
		}
		b.WriteString(before)
		b.WriteString(" ")
		expr = expr[end:]
	}
	rest := reString.ReplaceAllString(b.String(), " ")
	rest = reGrouping.ReplaceAllString(rest, " ")
	rest = reRange.ReplaceAllString(rest, " ")
	for _, loc := range reIdent.FindAllStringIndex(rest, -1) {
		id := rest[loc[0]:loc[1]]
		after := strings.TrimLeft(rest[loc[1]:], " \t\n")
		if keywords[strings.ToLower(id)] || strings.HasPrefix(after, "(") || (loc[0] > 0 && isNumberPart(rest[loc[0]-1])) {
			continue
		}
		add(id)
	}
	return out
}

func isNumberPart(c byte) bool { return c >= '0' && c <= '9' || c == '.' }

// dashboardExprs returns every query of the dashboard: the panels' targets and the
// template variables' queries.
func dashboardExprs(t *testing.T, file string) []string {
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var doc any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	var out []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if s, ok := x.(string); ok && (k == "expr" || k == "definition") {
					out = append(out, s)
				}
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(doc)
	return out
}

// ruleExprs returns the expr of every rule: a one-line value, or a block scalar (| or >)
// made of the lines indented deeper than the key.
func ruleExprs(t *testing.T, file string) []string {
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	var block *strings.Builder
	blockIndent := 0
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		line := sc.Text()
		indent := len(line) - len(strings.TrimLeft(line, " "))
		trimmed := strings.TrimSpace(line)
		if block != nil {
			if trimmed == "" || indent > blockIndent {
				block.WriteString(trimmed + "\n")
				continue
			}
			out = append(out, block.String())
			block = nil
		}
		if strings.HasPrefix(trimmed, "#") {
			continue
		}
		v, ok := strings.CutPrefix(trimmed, "expr:")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		if strings.HasPrefix(v, "|") || strings.HasPrefix(v, ">") {
			block, blockIndent = &strings.Builder{}, indent
			continue
		}
		out = append(out, strings.Trim(v, `'`))
	}
	if block != nil {
		out = append(out, block.String())
	}
	return out
}

// runningInstanceMetrics runs one instance against a ledger simulator until a batch stored
// through its ingest API is committed, and returns the metric families its registry gathers.
func runningInstanceMetrics(t *testing.T) map[string]family {
	url := dbtest.NewDB(t)
	sim, err := dltsim.New(dltsim.Config{CommitLatency: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	simURL, err := sim.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sim.Close() })
	client, err := dlt.NewClient(dlt.Config{Flavor: dlt.FlavorSawtooth, URL: simURL, RequestTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	reg := prometheus.NewRegistry()
	n, err := node.New(dbtest.Open(t, pool, ""), node.Config{
		Claims:    claims.Config{Name: "metrics", RenewInterval: 100 * time.Millisecond, Expiry1: time.Second, Expiry2: 4 * time.Second},
		Submitter: client, Statuses: client, PollInterval: 50 * time.Millisecond,
		Listen: "127.0.0.1:0", Registry: reg,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("instance stopped with %v", err)
		}
	})
	testutil.WaitFor(t, 10*time.Second, "listener up", func() bool { return n.Addr() != "" })

	id, list := dlt.FakeBatch("svc-1", 0)
	resp, err := http.Post("http://"+n.Addr()+"/batches?service_id=svc-1", "application/octet-stream", bytes.NewReader(list))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("POST /batches: %s", resp.Status)
	}
	testutil.WaitFor(t, 30*time.Second, "the ingested batch committed", func() bool {
		var state string
		err := pool.QueryRow(ctx, `SELECT state FROM batchclaim.batches WHERE batch_id = $1`, id).Scan(&state)
		return err == nil && state == "COMMITTED"
	})

	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]family{}
	for _, mf := range mfs {
		f := family{labels: map[string]bool{}, histogram: strings.HasSuffix(mf.GetType().String(), "HISTOGRAM") || strings.HasSuffix(mf.GetType().String(), "SUMMARY")}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				f.labels[lp.GetName()] = true
			}
		}
		out[mf.GetName()] = f
	}
	return out
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	sort.Strings(s)
	if len(s) == 0 {
		return nil
	}
	return s
}
