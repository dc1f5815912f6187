package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batchclaim/batchclaim/observer"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
)

// status shows the retention job's last run: none at first, then the age, the rows deleted
// by the last run and in all, in text and in --json.
func TestStatusShowsRetention(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := dbtest.NewDB(t)
	status := func(args ...string) string {
		t.Helper()
		var stdout, stderr bytes.Buffer
		if code := realMain(ctx, append([]string{"status", "--database-url", url}, args...), &stdout, &stderr); code != 0 {
			t.Fatalf("status %v: exit %d; stderr %s", args, code, stderr.String())
		}
		return stdout.String()
	}
	if out := status(); !strings.Contains(out, "retention: no run recorded") {
		t.Fatalf("status before any run: %q", out)
	}
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, `INSERT INTO batchclaim.batches (service_id, batch_id, payload, state, updated_at)
		SELECT 'svc', 'b' || i, '\x00', 'COMMITTED', now() - interval '2 days' FROM generate_series(1, 3) i`); err != nil {
		t.Fatal(err)
	}
	r, err := observer.NewRetention(dbtest.Open(t, pool, ""), observer.RetentionConfig{MaxAge: 24 * time.Hour, InstanceID: uuid.New()})
	if err != nil {
		t.Fatal(err)
	}
	if run, err := r.PruneOnce(ctx, nil); err != nil || run.Pruned != 3 {
		t.Fatalf("retention run: %+v, %v", run, err)
	}
	if out := status(); !strings.Contains(out, "retention: finished batches deleted after 24h0m0s; last run") ||
		!strings.Contains(out, "deleted 3; 3 deleted in all") {
		t.Fatalf("status after a run: %q", out)
	}
	var st struct {
		Retention struct {
			Ran           bool       `json:"ran"`
			MaxAgeSeconds float64    `json:"max_age_seconds"`
			LastRunAt     *time.Time `json:"last_run_at"`
			LastRunPruned int64      `json:"last_run_pruned"`
			PrunedTotal   int64      `json:"pruned_total"`
		} `json:"retention"`
	}
	if err := json.Unmarshal([]byte(status("--json")), &st); err != nil {
		t.Fatal(err)
	}
	if r := st.Retention; !r.Ran || r.MaxAgeSeconds != 86400 || r.LastRunAt == nil || r.LastRunPruned != 3 || r.PrunedTotal != 3 {
		t.Fatalf("status --json retention: %+v", r)
	}
}
