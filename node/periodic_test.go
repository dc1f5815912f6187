package node_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/node"
	"github.com/batchclaim/batchclaim/periodic"
	"github.com/batchclaim/batchclaim/submitter"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
	"github.com/batchclaim/batchclaim/testkit/testutil"
	"github.com/batchclaim/batchclaim/ui"
)

// Periodic jobs configured on two nodes: each tick's job is stored once and run once, and the
// status page lists the job with its last tick and next run.
func TestPeriodicJobsOnNodes(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url := dbtest.NewDB(t)
	admin := newPool(t, url)
	var mu sync.Mutex
	runs := map[string]int{} // job id -> runs
	job := submitter.SubmitterFunc(func(_ context.Context, b batchclaim.Batch) (batchclaim.Result, error) {
		mu.Lock()
		runs[b.BatchID]++
		mu.Unlock()
		return batchclaim.Result{Verdict: batchclaim.Done}, nil
	})
	every := []periodic.Job{{Name: "tick", Schedule: periodic.Every(time.Second), Payload: []byte("{}")}}
	for _, name := range []string{"a", "b"} {
		runJobs(t, url, name, job, func(c *node.Config) { c.Periodic = every })
	}
	testutil.WaitFor(t, 60*time.Second, "three ticks run", func() bool {
		var n int
		err := admin.QueryRow(ctx, `SELECT count(*) FROM batchclaim.batches WHERE service_id = 'periodic/tick' AND state = 'COMMITTED'`).Scan(&n)
		return err == nil && n >= 3
	})
	mu.Lock()
	for id, n := range runs {
		if !strings.HasPrefix(id, "periodic/tick/") || n != 1 {
			t.Errorf("job %s ran %d times", id, n)
		}
	}
	mu.Unlock()

	h, err := ui.New(dbtest.Open(t, admin, ""), ui.Config{})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	h.Register(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/api/status")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var st ui.Status
	if err := json.Unmarshal(body, &st); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	if len(st.Periodic) != 1 || st.Periodic[0].Name != "tick" || st.Periodic[0].NextRun == nil || st.Periodic[0].LastTick == nil ||
		!st.Periodic[0].NextRun.After(*st.Periodic[0].LastTick) {
		t.Errorf("the status page's periodic jobs: %s", body)
	}
}
