package chaos

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/batchclaim/batchclaim/testkit/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// judgeStall reports an instance that held a service_id with unfinished work and wrote
// nothing since from, names the head that waited, and saves the instance's goroutines and
// metrics; an instance that wrote, or held no work, is not reported.
func TestJudgeStall(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.NewPool(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/debug/pprof/goroutine":
			_, _ = io.WriteString(w, "goroutine 1 [select]:\n")
		case "/metrics":
			_, _ = io.WriteString(w, "batchclaim_queuer_in_flight 3\n")
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := pool.Exec(ctx, sql, args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	stuck, busy, idle := uuid.New(), uuid.New(), uuid.New()
	for _, id := range []uuid.UUID{stuck, busy, idle} {
		exec(`INSERT INTO batchclaim.instances (id, name, nonce, expiry_1, expiry_2) VALUES ($1, 'x', gen_random_uuid(), now() + interval '1 hour', now() + interval '2 hours')`, id)
	}
	exec(`INSERT INTO batchclaim.service_id_claims (service_id, claimant, epoch) VALUES ('s1', $1, 7), ('s2', $2, 8), ('s3', $3, 9)`, stuck, busy, idle)
	exec(`INSERT INTO batchclaim.batches (service_id, batch_id, payload, state, claimant, claim_epoch, attempts, submitted_at)
	      VALUES ('s1', 'a1', '', 'PENDING', $1, 7, 1, now()), ('s1', 'a2', '', 'NEW', NULL, NULL, 0, NULL), ('s2', 'b1', '', 'NEW', NULL, NULL, 0, NULL)`, stuck)
	exec(`INSERT INTO batchclaim.batches (service_id, batch_id, payload, state, finished_at) VALUES ('s3', 'c1', '', 'COMMITTED', now())`)
	var from time.Time
	if err := pool.QueryRow(ctx, `SELECT now() + interval '1 second'`).Scan(&from); err != nil {
		t.Fatal(err)
	}
	exec(`INSERT INTO batchclaim.batch_transitions (seq, from_state, to_state, instance_id, epoch, at)
	      SELECT seq, 'NEW', 'INFLIGHT', $1, 8, now() + interval '2 seconds' FROM batchclaim.batches WHERE batch_id = 'b1'`, busy)

	r := &run{logDir: t.TempDir(), pool: pool}
	addr := strings.TrimPrefix(srv.URL, "http://")
	for _, c := range []struct {
		name string
		id   uuid.UUID
	}{{"i1-1", stuck}, {"i2-1", busy}, {"i3-1", idle}} {
		r.judgeStall(ctx, &instance{name: c.name, state: stateRunning, listen: addr}, c.id, from, "its connections frozen")
	}
	if len(r.stalled) != 1 {
		t.Fatalf("stalled: %q, want i1-1's alone", r.stalled)
	}
	got := r.stalled[0]
	for _, want := range []string{"i1-1: its connections frozen", "heads: s1@7 seq ", " PENDING (attempts 1, epoch of its mark 7, updated ",
		"its goroutines in ", "its metrics in "} {
		if !strings.Contains(got, want) {
			t.Errorf("report %q lacks %q", got, want)
		}
	}
	if strings.Contains(got, "NEW") {
		t.Errorf("report %q names more than the head", got)
	}
	tag := "stalled-" + from.UTC().Format("150405.000")
	for file, want := range map[string]string{
		"i1-1." + tag + ".goroutines.txt": "goroutine 1 [select]:\n",
		"i1-1." + tag + ".metrics.txt":    "batchclaim_queuer_in_flight 3\n",
	} {
		if b, err := os.ReadFile(filepath.Join(r.logDir, file)); err != nil || string(b) != want {
			t.Errorf("%s: %q, %v", file, b, err)
		}
	}
}
