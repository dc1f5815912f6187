package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/batchclaim/batchclaim/cmd/batchclaim/internal/testbin"
	"github.com/batchclaim/batchclaim/migrations"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
	"github.com/batchclaim/batchclaim/testkit/testutil"
)

// The operator's commands on a real database: migrate version/down/up, enqueue, status.
func TestMigrateEnqueueStatus(t *testing.T) {
	t.Parallel()
	url := dbtest.NewDB(t)
	run := func(want int, args ...string) string {
		t.Helper()
		var stdout, stderr bytes.Buffer
		if code := realMain(t.Context(), append(args, "--database-url", url), &stdout, &stderr); code != want {
			t.Fatalf("%v: exit %d, want %d; stderr %s", args, code, want, stderr.String())
		}
		return stdout.String()
	}
	latest, err := migrations.Latest()
	if err != nil || latest < 3 {
		t.Fatalf("latest migration %d, %v", latest, err)
	}
	clean := fmt.Sprintf("schema version %d of %d in schema batchclaim (clean)", latest, latest)
	if out := run(0, "migrate", "version"); !strings.Contains(out, clean) {
		t.Fatalf("migrate version: %q, want %q", out, clean)
	}
	if out := run(0, "migrate", "down", "0"); !strings.Contains(out, fmt.Sprintf("schema version 0 of %d", latest)) {
		t.Fatalf("migrate down 0: %q", out)
	}
	if out := run(0, "migrate", "up"); !strings.Contains(out, clean) {
		t.Fatalf("migrate up: %q, want %q", out, clean)
	}

	// enqueue a BatchList of two batches from a file, twice: stored once.
	list := fakeList(t, "svc-a", 2)
	file := t.TempDir() + "/batches.bin"
	if err := writeFile(file, list); err != nil {
		t.Fatal(err)
	}
	if out := run(0, "enqueue", "--service-id", "svc-a", file); strings.Count(out, " stored") != 2 {
		t.Fatalf("enqueue: %q", out)
	}
	if out := run(0, "enqueue", "--service-id", "svc-a", file); strings.Count(out, "already stored") != 2 {
		t.Fatalf("enqueue again: %q", out)
	}

	var st struct {
		ServiceIDs int64 `json:"service_ids"`
		Unclaimed  int64 `json:"unclaimed"`
		Batches    struct {
			ByState      map[string]int64 `json:"by_state"`
			OpenServices int              `json:"open_services"`
		} `json:"batches"`
	}
	if err := json.Unmarshal([]byte(run(0, "status", "--json")), &st); err != nil {
		t.Fatal(err)
	}
	if st.ServiceIDs != 1 || st.Unclaimed != 1 || st.Batches.ByState["NEW"] != 2 || st.Batches.OpenServices != 1 {
		t.Fatalf("status --json: %+v", st)
	}
	if out := run(0, "status"); !strings.Contains(out, "batches: NEW 2") || !strings.Contains(out, "svc-a") {
		t.Fatalf("status: %q", out)
	}

	// A second schema in the same database is a second, independent set of tables.
	if out := run(0, "migrate", "up", "--schema", "other"); !strings.Contains(out, "in schema other (clean)") {
		t.Fatalf("migrate up --schema other: %q", out)
	}
	if out := run(0, "enqueue", "--schema", "other", "--service-id", "svc-a", file); strings.Count(out, " stored") != 2 {
		t.Fatalf("enqueue --schema other: %q", out)
	}
	if err := json.Unmarshal([]byte(run(0, "status", "--json", "--schema", "other")), &st); err != nil {
		t.Fatal(err)
	}
	if st.ServiceIDs != 1 || st.Batches.ByState["NEW"] != 2 {
		t.Fatalf("status --json --schema other: %+v", st)
	}
	var stderr bytes.Buffer
	if code := realMain(t.Context(), []string{"status", "--schema", "nothere", "--database-url", url}, io.Discard, &stderr); code == 0 ||
		!strings.Contains(stderr.String(), "schema nothere has no batchclaim tables: run migrate up") {
		t.Fatalf("status in a schema never migrated: exit %d, %q", code, stderr.String())
	}
	if code := realMain(t.Context(), []string{"migrate", "up", "--schema", "public", "--database-url", url}, io.Discard, &stderr); code == 0 ||
		!strings.Contains(stderr.String(), "a schema of their own") {
		t.Fatalf("migrate up --schema public: exit %d, %q", code, stderr.String())
	}
}

// demo --json on a small shape: the main job end to end, checked by its own summary.
func TestDemoJSON(t *testing.T) {
	t.Parallel()
	bin := testbin.Path(t)
	for _, flavor := range []string{"sawtooth", "scabbard"} {
		t.Run(flavor, func(t *testing.T) {
			t.Parallel()
			demoJSON(t, bin, flavor)
		})
	}
}

func demoJSON(t *testing.T, bin, flavor string) {
	cmd := exec.Command(bin, "demo", "--json", "--flavor", flavor, "--service-ids", "30", "--batches", "4")
	cmd.Env = append(cmd.Environ(), "DATABASE_URL="+dbtest.AdminURL(t))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("demo: %v\n%s", err, stderr.String())
	}
	var sum map[string]any
	if err := json.Unmarshal(stdout.Bytes(), &sum); err != nil {
		t.Fatalf("stdout is not one JSON object: %v\n%s", err, stdout.String())
	}
	for _, k := range []string{"batches_total", "committed", "invalid", "lost", "order_violations", "duplicate_posts",
		"duplicate_posts_unexplained", "stale_writes_rejected", "takeovers", "max_takeover_seconds", "duration_seconds"} {
		if _, ok := sum[k]; !ok {
			t.Errorf("summary lacks %q", k)
		}
	}
	if sum["batches_total"] != 120.0 || sum["committed"] != 120.0 || sum["lost"] != 0.0 ||
		sum["order_violations"] != 0.0 || sum["duplicate_posts_unexplained"] != 0.0 {
		t.Fatalf("summary: %v", sum)
	}
	if sum["takeovers"].(float64) == 0 {
		t.Fatalf("no takeover after a SIGKILL: %v", sum)
	}
}

// bench --json on a small shape: the figures are printed, and once the claims are balanced a
// quiet fleet changes no ownership.
func TestBenchJSON(t *testing.T) { // not parallel: it sets DATABASE_URL
	var stdout, stderr bytes.Buffer
	t.Setenv("DATABASE_URL", dbtest.AdminURL(t))
	code := realMain(t.Context(), []string{"bench", "--json", "--scenario", "cycle", "--instances", "3", "--service-ids", "60", "--duration", "1s"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("bench: exit %d: %s", code, stderr.String())
	}
	var out struct {
		Phases []struct {
			Name         string `json:"name"`
			Cycles       int64  `json:"cycles"`
			OwnerChanges int64  `json:"ownership_changes"`
		} `json:"phases"`
		Totals struct {
			InstanceRowUpdates int64 `json:"instance_row_updates"`
			Cycles             int64 `json:"cycles"`
		} `json:"totals"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		t.Fatalf("%v: %s", err, stdout.String())
	}
	if len(out.Phases) != 2 || out.Phases[0].OwnerChanges < 60 || out.Phases[1].Cycles == 0 || out.Phases[1].OwnerChanges != 0 {
		t.Fatalf("phases %+v: want 60+ ownership changes while acquiring and none in the steady phase", out.Phases)
	}
	if out.Totals.InstanceRowUpdates < out.Totals.Cycles {
		t.Fatalf("totals %+v: every cycle renews the lease row", out.Totals)
	}
}

// migrate down behind a long transaction that holds batches: it says what it waits for and
// tries again, and goes in once the transaction ends. A negative --lock-timeout is refused.
func TestMigrateSaysWhatItWaitsFor(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url := dbtest.NewDB(t)
	var stderr bytes.Buffer
	if code := realMain(ctx, []string{"migrate", "up", "--lock-timeout", "-1s", "--database-url", url}, io.Discard, &stderr); code == 0 ||
		!strings.Contains(stderr.String(), "--lock-timeout -1s: must not be negative") {
		t.Fatalf("migrate up --lock-timeout -1s: exit %d, %q", code, stderr.String())
	}
	holder, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close(context.Background())
	var pid int
	tx, err := holder.Begin(ctx)
	if err == nil {
		err = tx.QueryRow(ctx, `SELECT pg_backend_pid() FROM batchclaim.batches RIGHT JOIN (SELECT 1) one ON true LIMIT 1`).Scan(&pid)
	}
	if err != nil {
		t.Fatal(err)
	}
	w := &testutil.SyncBuffer{}
	var stdout bytes.Buffer
	code := make(chan int, 1)
	go func() {
		code <- realMain(ctx, []string{"migrate", "down", "--lock-timeout", "100ms", "--database-url", url}, &stdout, w)
	}()
	testutil.WaitFor(t, 30*time.Second, "migrate down says it waits", func() bool { return w.String() != "" })
	select {
	case c := <-code:
		t.Fatalf("migrate down ended (exit %d) while a transaction held batches: %s", c, w.String())
	default:
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if c := <-code; c != 0 {
		t.Fatalf("migrate down: exit %d: %s", c, w.String())
	}
	latest, _ := migrations.Latest()
	if out := w.String(); !strings.Contains(out, fmt.Sprintf("migration %d waited 100ms for a lock and was rolled back (attempt 1); trying again in 100ms", latest)) ||
		!strings.Contains(out, fmt.Sprintf("pid %d (idle in transaction", pid)) {
		t.Errorf("stderr %q: want the wait and the holder, pid %d", out, pid)
	}
	if want := fmt.Sprintf("schema version %d of %d in schema batchclaim (clean)", latest-1, latest); !strings.Contains(stdout.String(), want) {
		t.Errorf("stdout %q, want %q", stdout.String(), want)
	}
}
