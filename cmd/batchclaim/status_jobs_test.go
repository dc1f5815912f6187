package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batchclaim/batchclaim/claims"
	"github.com/batchclaim/batchclaim/inspect"
	"github.com/batchclaim/batchclaim/jobs"
	"github.com/batchclaim/batchclaim/node"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
	"github.com/batchclaim/batchclaim/testkit/testutil"
)

type pingArgs struct {
	Host string `json:"host"`
}

func (pingArgs) Kind() string { return "ping" }

type reportArgs struct{}

func (reportArgs) Kind() string { return "report" }

// status counts typed jobs by kind and state, and status --job SEQ shows one job with its
// kind, own timeout and recorded output, in text and in --json.
func TestStatusShowsKindsAndOneJob(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url := dbtest.NewDB(t)
	status := func(args ...string) string {
		t.Helper()
		var stdout, stderr bytes.Buffer
		if code := realMain(ctx, append([]string{"status", "--database-url", url}, args...), &stdout, &stderr); code != 0 {
			t.Fatalf("status %v: exit %d; stderr %s", args, code, stderr.String())
		}
		return stdout.String()
	}
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	w := jobs.NewWorkers()
	jobs.AddWorker(w, jobs.WorkFunc(func(ctx context.Context, j *jobs.Job[pingArgs]) error {
		return jobs.RecordOutput(ctx, map[string]any{"host": j.Args.Host, "ms": 12})
	}))
	ping, err := jobs.Insert(ctx, pool, "net", "", pingArgs{Host: "db-1"}, jobs.Timeout(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for range 2 { // no worker: DISCARDED
		if _, err := jobs.Insert(ctx, pool, "net", "", reportArgs{}); err != nil {
			t.Fatal(err)
		}
	}
	n, err := node.New(dbtest.Open(t, pool, ""), node.Config{Submitter: w,
		Claims: claims.Config{Name: "a", RenewInterval: 100 * time.Millisecond, Expiry1: 3 * time.Second, Expiry2: 12 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- n.Run(runCtx) }()
	testutil.WaitFor(t, time.Minute, "every job finished", func() bool {
		var open int
		err := pool.QueryRow(ctx, `SELECT count(*) FROM batchclaim.batches WHERE unfinished`).Scan(&open)
		return err == nil && open == 0
	})
	stop()
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}

	out := status()
	for _, re := range []string{`(?m)^KIND\s+JOBS BY STATE$`, `(?m)^ping\s+COMMITTED 1$`, `(?m)^report\s+DISCARDED 2$`} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("status lacks a line matching %s:\n%s", re, out)
		}
	}
	var all struct {
		Kinds []inspect.KindStatus `json:"kinds"`
	}
	if err := json.Unmarshal([]byte(status("--json")), &all); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(all.Kinds); got != "[{ping map[COMMITTED:1]} {report map[DISCARDED:2]}]" {
		t.Errorf("status --json kinds: %s", got)
	}

	one := status("--job", fmt.Sprint(ping.Seq))
	for _, re := range []string{`(?m)^kind\s+ping$`, `(?m)^state\s+COMMITTED$`, `(?m)^timeout\s+2s$`, `(?m)^output\s+\{"ms": 12, "host": "db-1"\}$`} {
		if !regexp.MustCompile(re).MatchString(one) {
			t.Errorf("status --job lacks a line matching %s:\n%s", re, one)
		}
	}
	var j inspect.JobStatus
	if err := json.Unmarshal([]byte(status("--job", fmt.Sprint(ping.Seq), "--json")), &j); err != nil {
		t.Fatal(err)
	}
	if j.Kind != "ping" || j.State != "COMMITTED" || strings.Join(strings.Fields(string(j.Output)), "") != `{"ms":12,"host":"db-1"}` {
		t.Errorf("status --job --json: %+v (output %s)", j, j.Output)
	}
	var stdout, stderr bytes.Buffer
	if code := realMain(ctx, []string{"status", "--database-url", url, "--job", "999999"}, &stdout, &stderr); code == 0 || !strings.Contains(stderr.String(), "job 999999: not found") {
		t.Errorf("status --job of a missing job: exit %d, %s", code, stderr.String())
	}
}
