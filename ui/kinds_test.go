package ui_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/batchclaim/batchclaim/claims"
	"github.com/batchclaim/batchclaim/jobs"
	"github.com/batchclaim/batchclaim/node"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
	"github.com/batchclaim/batchclaim/testkit/testutil"
	"github.com/batchclaim/batchclaim/ui"
)

type welcomeArgs struct {
	User string `json:"user"`
}

func (welcomeArgs) Kind() string { return "welcome" }

type invoiceArgs struct{}

func (invoiceArgs) Kind() string { return "invoice" }

// The job view shows a job's kind (in the lists too, which filter by it), its own timeout
// and the output it recorded.
func TestJobViewShowsKindAndOutput(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.NewPool(t)
	w := jobs.NewWorkers()
	jobs.AddWorker(w, jobs.WorkFunc(func(ctx context.Context, j *jobs.Job[welcomeArgs]) error {
		return jobs.RecordOutput(ctx, map[string]string{"sent_to": j.Args.User})
	}))
	jobs.AddWorker(w, jobs.WorkFunc(func(ctx context.Context, j *jobs.Job[invoiceArgs]) error { return nil }))
	welcome, err := jobs.Insert(ctx, pool, "user-1", "", welcomeArgs{User: "ann"}, jobs.Timeout(1500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	invoice, err := jobs.Insert(ctx, pool, "user-1", "", invoiceArgs{})
	if err != nil {
		t.Fatal(err)
	}
	n, err := node.New(dbtest.Open(t, pool, ""), node.Config{Submitter: w, Listen: "127.0.0.1:0",
		Claims: claims.Config{Name: "a", RenewInterval: 100 * time.Millisecond, Expiry1: time.Second, Expiry2: 4 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- n.Run(runCtx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("node: %v", err)
		}
	})
	testutil.WaitFor(t, 20*time.Second, "both jobs committed", func() bool {
		var open int
		err := pool.QueryRow(ctx, `SELECT count(*) FROM batchclaim.batches WHERE state <> 'COMMITTED'`).Scan(&open)
		return err == nil && open == 0 && n.Addr() != ""
	})
	get := func(path string, v any) {
		t.Helper()
		resp, err := http.Get("http://" + n.Addr() + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, resp.StatusCode, body)
		}
		if err := json.Unmarshal(body, v); err != nil {
			t.Fatalf("GET %s: %v\n%s", path, err, body)
		}
	}

	var d ui.BatchDetail
	get("/api/batches/"+strconv.FormatInt(welcome.Seq, 10), &d)
	if d.Kind != "welcome" || d.TimeoutMs == nil || *d.TimeoutMs != 1500 || strings.ReplaceAll(string(d.Output), " ", "") != `{"sent_to":"ann"}` {
		t.Errorf("the welcome job's page: kind %q, timeout %v, output %s", d.Kind, d.TimeoutMs, d.Output)
	}
	var other ui.BatchDetail
	get("/api/batches/"+strconv.FormatInt(invoice.Seq, 10), &other)
	if other.Kind != "invoice" || other.TimeoutMs != nil || other.Output != nil {
		t.Errorf("the invoice job's page: kind %q, timeout %v, output %s; want no timeout or output", other.Kind, other.TimeoutMs, other.Output)
	}

	var all, welcomes ui.BatchList
	get("/api/batches?window=1h", &all)
	get("/api/batches?window=1h&kind=welcome", &welcomes)
	var kinds []string
	for _, b := range all.Batches {
		kinds = append(kinds, b.Kind)
	}
	if strings.Join(kinds, ",") != "invoice,welcome" {
		t.Errorf("the list's kinds: %v", kinds)
	}
	if len(welcomes.Batches) != 1 || welcomes.Batches[0].Seq != welcome.Seq || welcomes.Kind != "welcome" {
		t.Errorf("the list of kind welcome: %+v", welcomes)
	}
}
