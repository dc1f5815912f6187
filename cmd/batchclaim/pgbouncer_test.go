package main

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batchclaim/batchclaim/cmd/batchclaim/internal/pgbouncer"
	"github.com/batchclaim/batchclaim/cmd/batchclaim/internal/testbin"
	"github.com/batchclaim/batchclaim/dlt"
	"github.com/batchclaim/batchclaim/ingest"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
	"github.com/batchclaim/batchclaim/testkit/history"
)

// poolerRunArgs are the run flags an instance needs behind a transaction-mode pooler, beyond
// the URL: none. Without --notify-database-url an instance that finds a pooler turns listening
// for new work off by itself and polls every held claim each renew interval.
var poolerRunArgs = []string{}

// TestPipelineThroughPgBouncer runs the pipeline, demo-sized (200 service_ids x 10 batches,
// three instances, one SIGKILLed midway), with every connection of the instances and of the
// enqueueing client going through a real pgbouncer in transaction mode: the instances find
// out by themselves that startup parameters are refused and named prepared statements
// cannot be kept. Nothing may be lost or reordered.
func TestPipelineThroughPgBouncer(t *testing.T) {
	if testing.Short() {
		t.Skip("a demo-sized run takes about a minute")
	}
	if _, err := pgbouncer.Find(); err != nil {
		if os.Getenv("REQUIRE_PGBOUNCER") == "1" {
			t.Fatalf("REQUIRE_PGBOUNCER=1 but %v", err)
		}
		t.Skipf("%v (apt-get install pgbouncer)", err)
	}
	t.Parallel()
	ctx := context.Background()
	bin := testbin.Path(t)
	direct, err := url.Parse(dbtest.NewDB(t))
	if err != nil {
		t.Fatal(err)
	}
	b, err := pgbouncer.Start(ctx, pgbouncer.Options{Target: direct.Host, Mode: pgbouncer.ModeTransaction})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Stop()
	dbName := strings.TrimPrefix(direct.Path, "/")
	pooled := b.URL(dbName, nil)

	simAddr := mustFreeAddr(t)
	startProc(t, bin, "dlt-sim", "--flavor", "sawtooth", "--listen", simAddr, "--commit-latency", "20ms")
	simURL := "http://" + simAddr
	waitHTTP(t, simURL+"/_sim/posts")

	// The client stores through the pooler too, with statements that prepare nothing by name.
	pool, err := pgxpool.New(ctx, b.URL(dbName, url.Values{"default_query_exec_mode": {"exec"}}))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	const services, perService = 200, 10
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for n := range perService {
		for s := range services {
			svc := fmt.Sprintf("pooled-%03d", s)
			id, list := dlt.FakeBatch(svc, n)
			if _, err := ingest.Enqueue(ctx, tx, svc, id, list); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}

	var runs []*proc
	for i := range 3 {
		addr := mustFreeAddr(t)
		args := append([]string{"run", "--database-url", pooled, "--dlt-url", simURL,
			"--instance-name", fmt.Sprintf("pooled-%d", i), "--listen", addr, "--renew-interval", "200ms",
			"--expiry-1", "1500ms", "--expiry-2", "6s", "--poll-interval", "200ms", "--unknown-answers", "3",
			"--workers", "8"}, poolerRunArgs...)
		runs = append(runs, startProc(t, bin, args...))
		waitHTTP(t, "http://"+addr+"/readyz")
	}
	finished := func() int {
		var n int
		_ = pool.QueryRow(ctx, `SELECT count(*) FROM batchclaim.batches WHERE state IN ('COMMITTED', 'INVALID')`).Scan(&n)
		return n
	}
	deadline := time.Now().Add(4 * time.Minute)
	killed := false
	for n := finished(); n < services*perService; n = finished() {
		if !killed && n >= services*perService/5 {
			if err := runs[0].cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			killed = true
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d batches finished after 4 minutes", n, services*perService)
		}
		time.Sleep(200 * time.Millisecond)
	}
	rep, err := history.Check(ctx, pool, simRecord(t, simURL))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("through pgbouncer (transaction mode): %d batches, %d committed, %d invalid, %d lost, %d out of order, %d duplicate POSTs",
		rep.Batches, rep.Committed, rep.Invalid, rep.Lost, rep.OrderViolations, rep.DuplicatePosts)
	if rep.Lost != 0 || rep.OrderViolations != 0 || rep.DuplicatePostsUnexplained != 0 || rep.Batches != services*perService {
		t.Fatalf("through pgbouncer: %+v", rep)
	}
	_ = runs[1].cmd.Process.Signal(syscall.SIGTERM)
	_ = runs[1].cmd.Wait()
	if out := runs[1].out.String(); !strings.Contains(out, "refused the startup parameters") {
		t.Errorf("the instance did not say it connected without the refused startup parameters:\n%s", out)
	}
	if out := runs[1].out.String(); !strings.Contains(out, "not listening for new work") {
		t.Errorf("the instance did not say it polls instead of listening behind the pooler:\n%s", out)
	}
}
