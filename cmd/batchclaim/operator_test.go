package main

import (
	"bytes"
	"flag"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batchclaim/batchclaim/claims"
	"github.com/batchclaim/batchclaim/cmd/batchclaim/internal/cli"

	"github.com/batchclaim/batchclaim/ingest"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
)

// A mistyped flag is one line naming the flag and its closest spelling, not the whole usage.
func TestMistypedFlag(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--expiry1", "3s"}, "batchclaim run: unknown flag --expiry1 (did you mean --expiry-1?); see batchclaim run --help\n"},
		{[]string{"status", "--jsn"}, "batchclaim status: unknown flag --jsn (did you mean --json?); see batchclaim status --help\n"},
		{[]string{"status", "--frobnicate"}, "batchclaim status: unknown flag --frobnicate; see batchclaim status --help\n"},
		{[]string{"run", "--workers", "x"}, "batchclaim run: invalid value \"x\" for --workers: parse error; see batchclaim run --help\n"},
	} {
		var stdout, stderr bytes.Buffer
		if code := realMain(t.Context(), tt.args, &stdout, &stderr); code != 2 || stderr.String() != tt.want {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and %q", tt.args, code, stderr.String(), tt.want)
		}
	}
	// --help still prints the whole usage.
	var stdout, stderr bytes.Buffer
	if code := realMain(t.Context(), []string{"status", "--help"}, &stdout, &stderr); code != 0 || !strings.Contains(stderr.String(), "Flags:") {
		t.Errorf("status --help: exit %d, stderr %q", code, stderr.String())
	}
}

// A BATCHCLAIM_ variable no flag reads is refused by name, with the closest name when it looks
// like a typo; run's variables are accepted by every command (they share its environment).
func TestCheckEnv(t *testing.T) {
	t.Parallel()
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	fs.Bool("json", false, "")
	fs.Int("claims", 0, "")
	for _, tt := range []struct {
		env  []string
		want string // "" = accepted
	}{
		{[]string{"BATCHCLAIM_JSON=1", "BATCHCLAIM_CLAIMS=3", "HOME=/x"}, ""},
		{[]string{"BATCHCLAIM_EXPIRY_1=3s", "BATCHCLAIM_DLT_URL=http://x"}, ""},            // run's
		{[]string{"BATCHCLAIM_TEST_WALL_CLOCK_OFFSET=1s", "BATCHCLAIM_DB_PASSWORD=x"}, ""}, // not flags
		{[]string{"BATCHCLAIM_CLAIM=3"}, "environment BATCHCLAIM_CLAIM: no flag of status reads it (did you mean BATCHCLAIM_CLAIMS?)"},
		{[]string{"BATCHCLAIM_NOTHING_LIKE_IT=1"}, "environment BATCHCLAIM_NOTHING_LIKE_IT: no flag of status reads it"},
	} {
		err := cli.CheckEnv(fs, tt.env)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%v: %v, want accepted", tt.env, err)
		case tt.want != "" && (err == nil || err.Error() != tt.want):
			t.Errorf("%v: %v, want %q", tt.env, err, tt.want)
		}
	}
	if err := cli.CheckEnv(newRunFlags(io.Discard).fs, []string{"BATCHCLAIM_EXPIRY1=3s"}); err == nil ||
		err.Error() != "environment BATCHCLAIM_EXPIRY1: no flag of run reads it (did you mean BATCHCLAIM_EXPIRY_1?)" {
		t.Errorf("run with BATCHCLAIM_EXPIRY1: %v", err)
	}
}

// Every BATCHCLAIM_ variable the deployment files and scripts set is one run accepts.
func TestDeployEnvAccepted(t *testing.T) {
	t.Parallel()
	var env []string
	err := filepath.WalkDir("../../deploy", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasSuffix(path, ".go") {
			return err
		}
		b, err := os.ReadFile(path)
		for _, name := range regexp.MustCompile(`BATCHCLAIM_[A-Z0-9_]+`).FindAllString(string(b), -1) {
			env = append(env, name+"=x")
		}
		return err
	})
	if err != nil || len(env) == 0 {
		t.Fatalf("deploy/: %v, %d variables", err, len(env))
	}
	if err := cli.CheckEnv(newRunFlags(io.Discard).fs, env); err != nil {
		t.Error(err)
	}
}

// The daemon refuses to start with a mistyped variable instead of running with the default.
func TestRunRefusesUnknownEnv(t *testing.T) {
	t.Setenv("BATCHCLAIM_EXPIRY1", "3s")
	var stdout, stderr bytes.Buffer
	code := realMain(t.Context(), []string{"run", "--database-url", "postgres://x@127.0.0.1:1/x", "--dlt-url", "http://127.0.0.1:1"}, &stdout, &stderr)
	want := "batchclaim run: environment BATCHCLAIM_EXPIRY1: no flag of run reads it (did you mean BATCHCLAIM_EXPIRY_1?)\n"
	if code != 1 || stderr.String() != want {
		t.Errorf("exit %d, stderr %q; want exit 1 and %q", code, stderr.String(), want)
	}
}

// Small CLI messages: the command list's columns, migrate's bad word, a package command's
// error with one prefix, flag help without backquotes.
func TestCommandMessages(t *testing.T) {
	t.Parallel()
	var stdout, stderr bytes.Buffer
	realMain(t.Context(), []string{"--help"}, &stdout, &stderr)
	col := -1
	for _, line := range strings.Split(stdout.String(), "\n") {
		if !strings.HasPrefix(line, "  ") {
			continue
		}
		name := strings.Fields(line)[0]
		rest := strings.TrimLeft(line[2+len(name):], " ")
		c := len(line) - len(rest)
		if col == -1 {
			col = c
		}
		if c != col || c < 2+len(name)+2 {
			t.Errorf("command list: %q's summary starts at column %d, others at %d", name, c, col)
		}
	}
	if !strings.Contains(stdout.String(), "  resume ") {
		t.Errorf("command list without resume:\n%s", stdout.String())
	}
	for _, tt := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"migrate", "sideways"}, 1, "batchclaim migrate: unknown action \"sideways\": want up, down [N] or version\n"},
		{[]string{"dlt-sim", "--flavor", "fabric"}, 1, "batchclaim dlt-sim: invalid value \"fabric\" for --flavor: unknown ledger flavor \"fabric\" (want \"sawtooth\" or \"scabbard\")\n"},
		{[]string{"resume"}, 2, "batchclaim resume: give one SERVICE_ID; see batchclaim resume --help\n"},
	} {
		stdout.Reset()
		stderr.Reset()
		if code := realMain(t.Context(), tt.args, &stdout, &stderr); code != tt.code || stderr.String() != tt.want {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and %q", tt.args, code, stderr.String(), tt.code, tt.want)
		}
	}
	for _, args := range [][]string{{"election", "run", "--help"}, {"failover", "node", "--help"}} {
		stderr.Reset()
		realMain(t.Context(), args, &stdout, &stderr)
		if strings.Contains(stderr.String(), "`") || !strings.Contains(stderr.String(), "Flags:") {
			t.Errorf("%v: help with backquotes or none:\n%s", args, stderr.String())
		}
	}
}

// resume lifts a halt as the status page does; status on a database without the schema says
// to migrate.
func TestResumeAndUnmigratedStatus(t *testing.T) {
	t.Parallel()
	url := dbtest.NewDB(t)
	run := func(want int, args ...string) (string, string) {
		t.Helper()
		var stdout, stderr bytes.Buffer
		if code := realMain(t.Context(), append(args, "--database-url", url), &stdout, &stderr); code != want {
			t.Fatalf("%v: exit %d, want %d; stderr %s", args, code, want, stderr.String())
		}
		return stdout.String(), stderr.String()
	}
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `INSERT INTO batchclaim.service_halts (service_id, seq, reason) VALUES ('svc-h', 7, 'batch INVALID: bad signature')`); err != nil {
		t.Fatal(err)
	}
	// status shows each instance's version without --json.
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	eng, err := claims.New(dbtest.Open(t, pool, ""), claims.Config{Name: "inst-v", Version: "9.9.9+abc"})
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Register(ctx); err != nil {
		t.Fatal(err)
	}
	if out, _ := run(0, "status"); !regexp.MustCompile(`(?m)^INSTANCE +HOST +VERSION .*\ninst-v +\S+ +9\.9\.9\+abc `).MatchString(out) {
		t.Fatalf("status without the instance's version:\n%s", out)
	}
	if out, _ := run(0, "status"); !strings.Contains(out, "HALTED svc-h at seq 7") || !strings.Contains(out, "batchclaim resume SERVICE_ID") {
		t.Fatalf("status: %s", out)
	}
	// A transaction holding the halt's row: resume gives up at its --timeout, changing nothing.
	lockRow(t, url, `SELECT 1 FROM batchclaim.service_halts WHERE service_id = 'svc-h' FOR UPDATE`, func() {
		_, errOut := run(1, "resume", "svc-h", "--timeout", "1s")
		if !strings.Contains(errOut, `service_id "svc-h" not changed within 1s: another transaction may hold its halt`) {
			t.Fatalf("resume behind a lock: %q", errOut)
		}
	})
	if out, _ := run(0, "resume", "svc-h"); !strings.HasPrefix(out, "resumed svc-h: halted at seq 7 since ") || !strings.HasSuffix(out, ": batch INVALID: bad signature\n") {
		t.Fatalf("resume: %q", out)
	}
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM batchclaim.service_halts`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("halts after resume: %d, %v", n, err)
	}
	if _, errOut := run(1, "resume", "svc-h"); errOut != "batchclaim resume: service_id \"svc-h\" is not halted\n" {
		t.Fatalf("resume again: %q", errOut)
	}
	if _, errOut := run(1, "resume", "bad\x01id"); !strings.Contains(errOut, "service_id \"bad\\x01id\"") {
		t.Fatalf("resume of a bad id: %q", errOut)
	}

	run(0, "migrate", "down", "0")
	for _, args := range [][]string{{"status"}, {"resume", "svc-h"}} {
		if _, errOut := run(1, args...); !strings.Contains(errOut, "schema batchclaim has no batchclaim tables: run migrate up") || strings.Count(errOut, "\n") != 1 {
			t.Errorf("%v on an unmigrated database: %q", args, errOut)
		}
	}
}

// retry and cancel change one batch as the status page's buttons do, and say why when they
// cannot.
func TestRetryAndCancelCommands(t *testing.T) {
	t.Parallel()
	url := dbtest.NewDB(t)
	run := func(want int, args ...string) (string, string) {
		t.Helper()
		var stdout, stderr bytes.Buffer
		if code := realMain(t.Context(), append(args, "--database-url", url), &stdout, &stderr); code != want {
			t.Fatalf("%v: exit %d, want %d; stdout %s stderr %s", args, code, want, stdout.String(), stderr.String())
		}
		return stdout.String(), stderr.String()
	}
	pool, err := pgxpool.New(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	st, err := ingest.Enqueue(t.Context(), pool, "svc-j", "job-1", nil, ingest.RunAt(time.Now().Add(time.Hour)))
	if err != nil {
		t.Fatal(err)
	}
	seq := strconv.FormatInt(st.Seq, 10)

	// A transaction holding the batch's row: cancel and retry give up at their --timeout, and
	// the batch is as it was.
	behindLock := func(cmd string) {
		t.Helper()
		lockRow(t, url, `SELECT 1 FROM batchclaim.batches WHERE seq = `+seq+` FOR UPDATE`, func() {
			if _, errOut := run(1, cmd, seq, "--timeout", "1s"); !strings.Contains(errOut, "batch "+seq+" not changed within 1s: another transaction may hold its row") ||
				!strings.Contains(errOut, "batchclaim status --job "+seq) {
				t.Fatalf("%s behind a lock: %q", cmd, errOut)
			}
		})
	}
	behindLock("cancel")
	if _, errOut := run(1, "cancel", seq, "--timeout", "0s"); !strings.Contains(errOut, "--timeout 0s: must be positive") {
		t.Fatalf("cancel --timeout 0s: %q", errOut)
	}
	if out, _ := run(0, "cancel", seq, "--reason", "not needed"); out != "batch "+seq+" of svc-j: NEW -> CANCELLED\n" {
		t.Fatalf("cancel: %q", out)
	}
	var lastErr string
	if err := pool.QueryRow(t.Context(), `SELECT last_error FROM batchclaim.batches WHERE seq = $1`, st.Seq).Scan(&lastErr); err != nil || lastErr != "not needed" {
		t.Fatalf("the cancelled batch's last error: %q, %v", lastErr, err)
	}
	if _, errOut := run(1, "cancel", seq); !strings.Contains(errOut, "batch state changed: it is CANCELLED, not NEW, DELAYED or INFLIGHT") {
		t.Fatalf("cancel again: %q", errOut)
	}
	behindLock("retry")
	if out, _ := run(0, "retry", seq); out != "batch "+seq+" of svc-j: CANCELLED -> NEW\n" {
		t.Fatalf("retry: %q", out)
	}
	if _, errOut := run(1, "retry", "999999"); errOut != "batchclaim retry: there is no batch 999999\n" {
		t.Fatalf("retry of no batch: %q", errOut)
	}
	if _, errOut := run(1, "retry", "x1"); !strings.Contains(errOut, `SEQ "x1": want a positive integer`) {
		t.Fatalf("retry of a bad SEQ: %q", errOut)
	}
	if _, errOut := run(2, "cancel"); !strings.Contains(errOut, "give one SEQ") {
		t.Fatalf("cancel without SEQ: %q", errOut)
	}
}

// lockRow runs during with a row locked by another transaction (lock, a SELECT ... FOR
// UPDATE, must find it), and checks that a command that gave up at its --timeout left no
// transaction behind waiting for the row: no session waits for the lock's holder after during.
func lockRow(t *testing.T, url, lock string, during func()) {
	t.Helper()
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // the test's own lock
	if tag, err := tx.Exec(ctx, lock); err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("%s: %v, %v", lock, tag, err)
	}
	during()
	var waiters int
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE pg_backend_pid() = ANY (pg_blocking_pids(pid))`).Scan(&waiters); err != nil || waiters != 0 {
		t.Fatalf("%d lock waiters left behind, %v", waiters, err)
	}
}
