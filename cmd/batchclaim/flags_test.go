package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batchclaim/batchclaim/testkit/dbtest"
)

// Values that would run an instance that does nothing useful, or silently mean something
// else, stop `run` (and the other listeners) at start with one line naming the flag; none of
// these reaches the database.
func TestRunRefusesBadFlags(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	base := []string{"run", "--database-url", "postgres://x@127.0.0.1:1/x", "--dlt-url", "http://127.0.0.1:1"}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--expiry-1", "1ms"}, "--expiry-1 1ms: at least 500ms (did you mean 1m?); the renew interval follows from it and would be 166.666µs"},
		{[]string{"--expiry-1", "999999h"}, "--expiry-1 999999h0m0s: at most 24h0m0s"},
		{[]string{"--expiry-2", "999999h"}, "--expiry-2 999999h0m0s: at most 24h0m0s"},
		{[]string{"--renew-interval", "1ms"}, "--renew-interval 1ms: at least 50ms"},
		{[]string{"--renew-interval", "0s"}, "--renew-interval 0s: must be positive"},
		{[]string{"--expiry-1", "-3s"}, "--expiry-1 -3s: must be positive"},
		{[]string{"--workers", "0"}, "--workers 0: must be positive (default 1024)"},
		{[]string{"--max-body", "0"}, "--max-body 0: must be positive (default 10485760)"},
		{[]string{"--max-ingest-requests", "-1"}, "--max-ingest-requests -1: must be positive"},
		{[]string{"--poll-interval", "0s"}, "--poll-interval 0s: must be positive"},
		{[]string{"--db-max-conns", "1"}, "--db-max-conns 1: at least 2"},
		{[]string{"--max-body", "1048576", "--max-ingest-memory", "1048577"}, "--max-ingest-memory 1048577 is under 2 x --max-body 1048576"},
		{[]string{"--allowed-hosts", "http://x.example"}, "--allowed-hosts: allowed host \"http://x.example\""},
		{[]string{"--tls-cert", filepath.Join(dir, "missing.pem"), "--tls-key", filepath.Join(dir, "missing.key")}, "--tls-cert " + filepath.Join(dir, "missing.pem") + " / --tls-key"},
		{[]string{"--tls-cert", empty}, "--tls-cert and --tls-key go together"},
		{[]string{"--auth-token-file", filepath.Join(dir, "missing")}, "--auth-token-file: read token file"},
		{[]string{"--dlt-authorization", "x", "--dlt-authorization-file", empty}, "--dlt-authorization and --dlt-authorization-file: give one of them"},
		{[]string{"--dlt-authorization-file", empty}, "--dlt-authorization-file " + empty + ": the file is empty"},
		{[]string{"--dlt-authorization-file", filepath.Join(dir, "missing")}, "--dlt-authorization-file " + filepath.Join(dir, "missing") + ": open: no such file or directory"},
		{[]string{"--dlt-ca", filepath.Join(dir, "missing.pem")}, "ledger (--dlt-url, --dlt-ca): "},
		{[]string{"--claims-only", "--listen", "0.0.0.0:0"}, "--listen 0.0.0.0:0 is not a loopback address: it would serve /healthz and /metrics to anyone"},
	} {
		var stdout, stderr bytes.Buffer
		code := realMain(t.Context(), append(append([]string{}, base...), tt.args...), &stdout, &stderr)
		if code != 1 || !strings.Contains(stderr.String(), tt.want) {
			t.Errorf("run %v: exit %d, stderr %q; want exit 1 and %q", tt.args, code, stderr.String(), tt.want)
		}
		if regexp.MustCompile(`-[0-9]+h[0-9]`).MatchString(stderr.String()) {
			t.Errorf("run %v: a negative duration in %q", tt.args, stderr.String())
		}
		if strings.Contains(stderr.String(), "cannot reach database") {
			t.Errorf("run %v went on to the database", tt.args)
		}
	}

	var stdout, stderr bytes.Buffer
	code := realMain(t.Context(), []string{"election", "run", "--roles", "a", "--listen", "0.0.0.0:0", "--database-url", "postgres://x@127.0.0.1:1/x"}, &stdout, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), "--listen 0.0.0.0:0 is not a loopback address: it would serve /primary and /healthz to anyone") {
		t.Errorf("election run on every interface: exit %d, stderr %q", code, stderr.String())
	}
	// With --insecure-listen the checks pass and the commands go on to the database.
	for _, args := range [][]string{
		append(append([]string{}, base...), "--claims-only", "--listen", "0.0.0.0:0", "--insecure-listen"),
		{"election", "run", "--roles", "a", "--listen", "0.0.0.0:0", "--insecure-listen", "--database-url", "postgres://x@127.0.0.1:1/x"},
	} {
		stderr.Reset()
		if code := realMain(t.Context(), args, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), "cannot reach database") {
			t.Errorf("%v: exit %d, stderr %q; want the database error", args, code, stderr.String())
		}
	}
}

// enqueue refuses a service_id with control or invisible characters before it touches the
// database, naming the flag and escaping the character.
func TestEnqueueRefusesBadServiceID(t *testing.T) {
	t.Parallel()
	for id, want := range map[string]string{
		"svc\x1b[31m": "--service-id: service_id contains U+001B (a control character) at byte 3",
		"svc\u202e":   "--service-id: service_id contains U+202E (an invisible format character) at byte 3",
		"\xff\xfe":    "--service-id: service_id is not valid UTF-8",
	} {
		var stdout, stderr bytes.Buffer
		code := realMain(t.Context(), []string{"enqueue", "--service-id", id, "--database-url", "postgres://x@127.0.0.1:1/x", os.DevNull}, &stdout, &stderr)
		if code != 1 || !strings.Contains(stderr.String(), want) {
			t.Errorf("enqueue --service-id %+q: exit %d, stderr %q; want %q", id, code, stderr.String(), want)
		}
	}
}

// status prints service_ids, instance names and halt reasons stored before the rule, or by
// a ledger, escaped: nothing it prints can move the cursor or reorder the text.
func TestStatusEscapesStoredText(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url := dbtest.NewDB(t)
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	for _, sql := range []string{
		`INSERT INTO batchclaim.batches (service_id, batch_id, payload) VALUES (E'svc\x1b[2J', 'b1', '\x00'), (E'svc\u202egpj', 'b2', '\x00'), (E'svc\u200b', 'b3', '\x00')`,
		`INSERT INTO batchclaim.service_id_claims (service_id) VALUES (E'svc\x1b[2J'), (E'svc\u202egpj')`,
		`INSERT INTO batchclaim.service_halts (service_id, seq, reason) SELECT service_id, seq, E'INVALID: \x1b]0;owned\x07' FROM batchclaim.batches WHERE batch_id = 'b1'`,
		`INSERT INTO batchclaim.instances (id, name, host, version, expiry_1, expiry_2, nonce) VALUES (gen_random_uuid(), E'node\x1b[31m', E'host\u009b1m', 'v', now(), now() + interval '1s', gen_random_uuid())`,
	} {
		if _, err := pool.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	var stdout, stderr bytes.Buffer
	if code := realMain(ctx, []string{"status", "--claims", "-1", "--database-url", url}, &stdout, &stderr); code != 0 {
		t.Fatalf("status: exit %d: %s", code, stderr.String())
	}
	out := stdout.String()
	for i, r := range out {
		if r != '\n' && (r < 0x20 || r > 0x7e) {
			t.Fatalf("status printed %U at byte %d:\n%s", r, i, out)
		}
	}
	for _, want := range []string{`"svc\x1b[2J"`, `"svc\u202egpj"`, `"svc\u200b"`, `"INVALID: \x1b]0;owned\a"`, `"node\x1b[31m"`, `"host\u009b1m"`} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %s:\n%s", want, out)
		}
	}
}
