package node_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/batchclaim/batchclaim/dlt"
	"github.com/batchclaim/batchclaim/dlt/dltsim"
	"github.com/batchclaim/batchclaim/node"
	"github.com/batchclaim/batchclaim/testkit/testutil"
)

// A node with Retention set runs the job: finished batches older than the age are deleted,
// younger and unfinished ones stay, and /metrics counts what it deleted.
func TestNodeRunsRetention(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	e := setup(t, dlt.FlavorSawtooth, dltsim.Config{})
	if _, err := e.admin.Exec(ctx, `
		INSERT INTO batchclaim.batches (service_id, batch_id, payload, state, updated_at, finished_at)
		SELECT 'svc-old', 'old-' || i, '\x00', 'COMMITTED', now() - interval '3 hours', now() - interval '3 hours' FROM generate_series(1, 5) i;
		INSERT INTO batchclaim.batches (service_id, batch_id, payload, state, updated_at, finished_at)
		VALUES ('svc-young', 'young', '\x00', 'COMMITTED', now() - interval '10 minutes', now() - interval '10 minutes');`); err != nil {
		t.Fatal(err)
	}
	n, _ := e.start("a", func(c *node.Config) {
		c.Listen, c.Retention, c.RetentionInterval = "127.0.0.1:0", time.Hour, 50*time.Millisecond
	})
	left := func() (n int) {
		if err := e.admin.QueryRow(ctx, `SELECT count(*) FROM batchclaim.batches`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	testutil.WaitFor(t, 20*time.Second, "old finished batches deleted", func() bool { return left() == 1 })
	testutil.WaitFor(t, 10*time.Second, "listener up", func() bool { return n.Addr() != "" })
	resp, err := http.Get("http://" + n.Addr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(b), "batchclaim_batches_pruned_total 5\n") || strings.Contains(string(b), "batchclaim_retention_last_run_timestamp_seconds 0\n") {
		t.Fatalf("/metrics after pruning 5 batches:\n%s", grepLines(string(b), "retention", "pruned"))
	}
}

func grepLines(s string, words ...string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		for _, w := range words {
			if strings.Contains(l, w) {
				out = append(out, l)
				break
			}
		}
	}
	return strings.Join(out, "\n")
}
