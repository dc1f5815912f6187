package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/batchclaim/batchclaim/testkit/dbtest"
	"github.com/batchclaim/batchclaim/testkit/pglocal"
)

// make bench's ratios (bench/ratio.awk): a tuned jobs line followed at once by River's run at
// riverbench's tuning is a pair; each pair's ratio is printed, and their median, as for the
// producer scenarios' pairs. A jobs line followed by another scenario, and a River run after
// another River run, make no pair.
func TestBenchRatioPairs(t *testing.T) {
	awk, err := exec.LookPath("awk")
	if err != nil {
		t.Fatalf("make bench needs awk: %v", err)
	}
	jobs := func(rate, workers, conns int) string {
		return fmt.Sprintf(`{"scenario":"jobs","jobs_per_second":%d,"nodes":2,"workers_per_node":%d,"conns_per_node":%d,"keys":1000,"jobs_per_key":50}`, rate, workers, conns)
	}
	withFillfactor := func(line string, ff int) string {
		return strings.Replace(line, "}", fmt.Sprintf(`,"fillfactor":%d}`, ff), 1)
	}
	river := func(tuning string, rate int) string {
		return fmt.Sprintf(`{"scenario":"river","tuning":"%s","river_version":"v0","jobs_per_second":%d,"workers":2000,"fetch_cooldown_ms":2,"fetch_poll_interval_ms":20,"conns":4,"jobs":100000}`, tuning, rate)
	}
	enqueue := func(mine, theirs int) string {
		return fmt.Sprintf(`{"scenario":"enqueue","producers":16,"jobs_per_second":%d}`+"\n"+
			`{"scenario":"river-enqueue","river_version":"v0","tuning":"riverbench","workers":2000,"jobs_per_second":%d}`, mine, theirs)
	}
	in := strings.Join([]string{
		enqueue(5500, 5000), enqueue(4700, 5000), enqueue(5200, 5000),
		jobs(24000, 1024, 4), `{"scenario":"serial","jobs_per_second":1800}`, river("riverbench", 20000),
		jobs(40000, 500, 8), river("riverbench", 35000),
		jobs(38000, 500, 8), river("riverbench", 38000),
		withFillfactor(jobs(45000, 500, 8), 35), river("riverbench", 36000),
		river("riverbench", 50000), river("defaults", 9000),
	}, "\n") + "\n"
	cmd := exec.Command(awk, "-f", "../../bench/ratio.awk")
	cmd.Stdin = strings.NewReader(in)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("ratio.awk: %v\n%s", err, out)
	}
	for _, want := range []string{
		"backlog, 3 alternated pairs",
		"40000 jobs/s (2 nodes x 500 workers, 8 connections each, 1000 keys x 50 jobs) / 35000 (River v0, riverbench tuning",
		"= 1.14\n", "= 1.00\n", "= 1.25\n",
		"45000 jobs/s (2 nodes x 500 workers, 8 connections each, 1000 keys x 50 jobs, batches fillfactor 35) / 36000",
		"median of the pairs' ratios: 1.14 (lowest 1.00, highest 1.25)",
		"best of 5 runs: 50000 jobs/s",
		"enqueue 16 producers, single-job enqueue (River: Insert): 4700 jobs/s vs River 5000 = 0.94",
		"enqueue, best of each side: 5500 vs 5000 jobs/s = 1.10",
		"enqueue, median of the 3 pairs' ratios: 1.04 (lowest 0.94, highest 1.10)",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("ratio.awk's output lacks %q:\n%s", want, out)
		}
	}
}

// make bench-slow-wal's script refuses what it cannot run with before it starts a server:
// no command, a delay that is not a whole number of microseconds, no server binaries. None of
// these needs strace, which it would install.
func TestBenchSlowWALRefuses(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, tc := range []struct {
		env  []string
		args []string
		want string
	}{
		{nil, nil, "usage: bench/slow-wal.sh COMMAND [ARG...]"},
		{[]string{"DELAY_US=1.5ms"}, []string{"true"}, "DELAY_US must be a whole number of microseconds, got '1.5ms'"},
		{[]string{"PG_BIN=" + dir}, []string{"true"}, "no Postgres server binaries in '" + dir + "': set PG_BIN"},
	} {
		cmd := exec.Command("bash", append([]string{"../../bench/slow-wal.sh"}, tc.args...)...)
		cmd.Env = append(cmd.Environ(), tc.env...)
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), tc.want) {
			t.Errorf("slow-wal.sh %v with %v: %v, output %q; want a failure saying %q", tc.args, tc.env, err, out, tc.want)
		}
		if strings.Contains(string(out), "initdb") || strings.Contains(string(out), "database system") {
			t.Errorf("slow-wal.sh %v with %v went on to start a server: %q", tc.args, tc.env, out)
		}
	}
}

// make bench-slow-wal's script runs its command against a server of its own whose WAL flushes
// take at least the delay asked for (one commit's probe says so), with DATABASE_URL naming that
// server, fsync on; it exits with the command's status and leaves no server behind.
func TestBenchSlowWALServer(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("strace"); err != nil {
		if os.Getenv("REQUIRE_STRACE") == "1" {
			t.Fatal("REQUIRE_STRACE=1 but strace is not installed (apt-get install strace)")
		}
		t.Skip("strace is not installed; set REQUIRE_STRACE=1 to make this a failure")
	}
	pg, err := pglocal.Find("")
	if err != nil {
		if os.Getenv("REQUIRE_DB") == "1" {
			t.Fatalf("REQUIRE_DB=1 but %v", err)
		}
		t.Skipf("no local PostgreSQL binaries: %v", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	const delayMS = 20
	cmd := exec.Command("bash", "../../bench/slow-wal.sh", "bash", "-c",
		`echo "url=$DATABASE_URL"; "$PG_BIN/psql" -d "$DATABASE_URL" -Atc 'SHOW fsync' | sed 's/^/fsync=/'; exit 3`)
	cmd.Env = append(cmd.Environ(), fmt.Sprintf("DELAY_US=%d", delayMS*1000), fmt.Sprintf("PORT=%d", port), "PG_BIN="+pg)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 3 {
		t.Fatalf("slow-wal.sh with a command that exits 3: %v, output %q; want exit status 3", err, out)
	}
	for _, want := range []string{fmt.Sprintf("url=postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port), "fsync=on"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("slow-wal.sh's command printed no %q: %q", want, out)
		}
	}
	var ms float64
	if _, err := fmt.Sscanf(string(out[bytes.Index(out, []byte("): "))+3:]), "%f ms on average", &ms); err != nil || ms < delayMS {
		t.Errorf("one commit's probe with fdatasync delayed %d ms: %v ms (%v); want at least the delay: %q", delayMS, ms, err, out)
	}
	if c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port)); err == nil {
		c.Close()
		t.Errorf("a server still listens on port %d after slow-wal.sh returned", port)
	}
}

// Bad flags are usage errors (exit 2) that name what is wrong, before any database is used.
func TestBenchFlags(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--scenario", "river"}, `--scenario "river": want jobs, serial, ledger, enqueue, bulk, steady, defaults, latency, many-claims, failover, scale, churn, cycle or all`},
		{[]string{"--producers", "0"}, "--producers, --producer-keys, --producer-nodes, --bulk-jobs and --bulk-runs must be at least 1"},
		{[]string{"--bulk-jobs", "0"}, "--bulk-jobs and --bulk-runs must be at least 1"},
		{[]string{"--steady-rate", "0"}, "--steady-rate and --steady-window positive"},
		{[]string{"--enqueue-duration", "0s"}, "--enqueue-duration, --steady-duration"},
		{[]string{"--serial-jobs", "0"}, "--serial-jobs must be at least 1"},
		{[]string{"--latency-pause", "-1s"}, "--latency-pause -1s: must not be negative"}, // every numeric flag's bound (cli.Bound)
		{[]string{"--latency-batches", "0"}, "--latency-batches and --latency-service-ids must be at least 1"},
		{[]string{"--defaults-readyz-interval", "0s"}, "--defaults-readyz-interval and --defaults-timeout positive"},
		{[]string{"--many-claims", "10", "--many-claims-last", "11"}, "--many-claims-last at most --many-claims"},
		{[]string{"--keys", "0"}, "--keys and --per-key must be at least 1"},
		{[]string{"--fillfactor", "5"}, "--fillfactor 5: want 10 to 100, or 0 for the table's own"},
		{[]string{"--fillfactor", "101"}, "--fillfactor 101: want 10 to 100"},
		{[]string{"--scenario", "cycle", "--duration", "0s"}, "--duration positive"},
		{[]string{"--poll-interval", "-1s"}, "--poll-interval -1s: must not be negative"},
		{[]string{"extra"}, `unexpected argument "extra"`},
	} {
		var stdout, stderr bytes.Buffer
		code := realMain(t.Context(), append([]string{"bench"}, tc.args...), &stdout, &stderr)
		if code == 0 || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("bench %v: exit %d, stderr %q; want a failure saying %q", tc.args, code, stderr.String(), tc.want)
		}
		if stdout.Len() > 0 {
			t.Errorf("bench %v printed %q", tc.args, stdout.String())
		}
	}
}

// bench --json with the jobs, ledger and cycle scenarios on a tiny shape prints one JSON
// object per line on stdout, and every unit of work is counted: the writes that recorded the
// jobs and batches took commits and statements (several jobs may share one). The other
// scenarios have their own tests.
func TestBenchJSONScenarios(t *testing.T) { // not parallel: it sets DATABASE_URL
	t.Setenv("DATABASE_URL", dbtest.AdminURL(t))
	var stdout, stderr bytes.Buffer
	for _, scenario := range []string{"jobs", "ledger", "cycle"} {
		code := realMain(t.Context(), []string{"bench", "--json", "--scenario", scenario, "--nodes", "2", "--workers", "2", "--keys", "4", "--per-key", "3",
			"--poll-interval", "100ms", "--fillfactor", "50", "--instances", "2", "--service-ids", "10", "--duration", "300ms"}, &stdout, &stderr)
		if code != 0 {
			t.Fatalf("bench --scenario %s: exit %d: %s", scenario, code, stderr.String())
		}
	}
	var got []map[string]any
	sc := bufio.NewScanner(&stdout)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("line %q is not one JSON object: %v", sc.Text(), err)
		}
		got = append(got, m)
	}
	if len(got) != 3 || got[0]["scenario"] != "jobs" || got[1]["scenario"] != "ledger" || got[2]["scenario"] != "cycle" {
		t.Fatalf("want jobs, ledger, cycle, one a line; got %v", got)
	}
	jobs, ledger, cycle := got[0], got[1], got[2]
	if jobs["jobs"] != 12.0 || ledger["batches"] != 12.0 {
		t.Errorf("jobs %v, batches %v: want 4 x 3 = 12 each", jobs["jobs"], ledger["batches"])
	}
	// The server's CPU is read from /proc when it runs on this machine, as the test's does
	// when its URL names the loopback. Twelve jobs may take less than /proc's tick of 10 ms,
	// so the figure may be 0; what must hold is that the backends were found and read.
	u, err := url.Parse(dbtest.AdminURL(t))
	if err != nil {
		t.Fatal(err)
	}
	local := u.Hostname() == "127.0.0.1" || u.Hostname() == "localhost" || u.Hostname() == "::1"
	for _, c := range []struct {
		m                             map[string]any
		rate, stmts, cmt, cpu, server string
	}{
		{jobs, "jobs_per_second", "statements_per_job", "commits_per_job", "process_cpu_us_per_job", "server_cpu_us_per_job"},
		{ledger, "batches_per_second", "statements_per_batch", "commits_per_batch", "process_cpu_us_per_batch", "server_cpu_us_per_batch"},
	} {
		if c.m["fillfactor"] != 50.0 {
			t.Errorf("%s: fillfactor %v, want the 50 asked for", c.m["scenario"], c.m["fillfactor"])
		}
		if server, ok := c.m[c.server].(float64); (local || ok) && (!ok || server < 0 || num(c.m, "server_backends") < 1) {
			t.Errorf("%s: %s %v from %v backends; want the server's CPU read (server on this machine: %v)",
				c.m["scenario"], c.server, c.m[c.server], c.m["server_backends"], local)
		}
		rate, _ := c.m[c.rate].(float64)
		stmts, _ := c.m[c.stmts].(float64)
		cmt, _ := c.m[c.cmt].(float64)
		if cpu, _ := c.m[c.cpu].(float64); cpu <= 0 {
			t.Errorf("%s: %s %v, want the process's CPU counted", c.m["scenario"], c.cpu, c.m[c.cpu])
		}
		p50, _ := c.m["latency_p50_ms"].(float64)
		p99, _ := c.m["latency_p99_ms"].(float64)
		if rate <= 0 || cmt <= 0 || stmts <= 0 || p50 <= 0 || p99 < p50 {
			t.Errorf("%s: %s %v, %s %v, %s %v, latency p50 %v p99 %v", c.m["scenario"], c.rate, rate, c.cmt, cmt, c.stmts, stmts, p50, p99)
		}
		if list, _ := c.m["statements"].([]any); len(list) == 0 {
			t.Errorf("%s: no statement breakdown", c.m["scenario"])
		}
		if half, last := num(c.m, "key_half_done_p50"), num(c.m, "key_half_done_max"); half <= 0 || last < half || last > 1 {
			t.Errorf("%s: keys half done by %v of the run at the median key, %v at the last: want 0 < median <= last <= 1",
				c.m["scenario"], half, last)
		}
		if first := num(c.m, "first_done_seconds"); first <= 0 || first > num(c.m, "seconds") {
			t.Errorf("%s: first unit done %v s after the start of a %v s run", c.m["scenario"], first, c.m["seconds"])
		}
	}
	if phases, _ := cycle["phases"].([]any); len(phases) != 2 {
		t.Errorf("cycle: phases %v", cycle["phases"])
	}
}
