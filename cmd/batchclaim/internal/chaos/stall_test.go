package chaos

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batchclaim/batchclaim/testkit/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// execer returns a func that runs a statement on pool and fails the test if it fails.
func execer(t *testing.T, pool *pgxpool.Pool) func(sql string, args ...any) {
	return func(sql string, args ...any) {
		t.Helper()
		if _, err := pool.Exec(t.Context(), sql, args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
}

// registerLive stores instances with these ids, their leases live for an hour.
func registerLive(exec func(string, ...any), ids ...uuid.UUID) {
	for _, id := range ids {
		exec(`INSERT INTO batchclaim.instances (id, name, nonce, expiry_1, expiry_2) VALUES ($1, 'x', gen_random_uuid(), now() + interval '1 hour', now() + interval '2 hours')`, id)
	}
}

// judgeStall reports an instance whose held service_id had a head waiting for it and that
// wrote nothing since T1 + D into the outage, names that head, and saves the instance's
// goroutines and metrics. Heads that did not wait for it are left out: a service_id halted
// now or at the outage's start, a head not due; an instance that wrote, held no work, or held
// only such heads is not reported.
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
	exec := execer(t, pool)
	stuck, busy, idle, halted := uuid.New(), uuid.New(), uuid.New(), uuid.New()
	registerLive(exec, stuck, busy, idle, halted)
	exec(`INSERT INTO batchclaim.service_id_claims (service_id, claimant, epoch) VALUES
	      ('s1', $1, 7), ('s4', $1, 7), ('s5', $1, 7), ('s6', $1, 7), ('s2', $2, 8), ('s3', $3, 9), ('s7', $4, 9)`, stuck, busy, idle, halted)
	exec(`INSERT INTO batchclaim.batches (service_id, batch_id, payload, state, claimant, claim_epoch, attempts, submitted_at)
	      VALUES ('s1', 'a1', '', 'PENDING', $1, 7, 1, now())`, stuck)
	exec(`INSERT INTO batchclaim.batches (service_id, batch_id, payload) VALUES ('s1', 'a2', ''), ('s2', 'b1', ''), ('s4', 'd1', ''), ('s5', 'e1', ''), ('s7', 'g1', '')`)
	exec(`INSERT INTO batchclaim.batches (service_id, batch_id, payload, next_attempt_at) VALUES ('s6', 'f1', '', now() + interval '1 hour')`)
	exec(`INSERT INTO batchclaim.batches (service_id, batch_id, payload, state, finished_at) VALUES ('s3', 'c1', '', 'COMMITTED', now())`)
	exec(`INSERT INTO batchclaim.service_halts (service_id, seq, reason) VALUES ('s4', 1, 'invalid'), ('s7', 1, 'invalid')`)
	start, err := (&run{pool: pool}).outageStart(ctx)
	if err != nil {
		t.Fatal(err)
	}
	start.halted = append(start.halted, "s5") // halted as the outage began, resumed since
	exec(`INSERT INTO batchclaim.batch_transitions (seq, from_state, to_state, instance_id, epoch, at)
	      SELECT seq, 'NEW', 'INFLIGHT', $1, 8, now() + interval '10 seconds' FROM batchclaim.batches WHERE batch_id = 'b1'`, busy)

	r := &run{logDir: t.TempDir(), pool: pool, cfg: Config{Expiry1: 3 * time.Second}} // from: 5 s into the outage
	addr := strings.TrimPrefix(srv.URL, "http://")
	for _, c := range []struct {
		name string
		id   uuid.UUID
	}{{"i1-1", stuck}, {"i2-1", busy}, {"i3-1", idle}, {"i4-1", halted}} {
		r.judgeStall(ctx, &instance{name: c.name, state: stateRunning, listen: addr}, c.id, start, "its connections frozen")
	}
	if len(r.stalled) != 1 {
		t.Fatalf("stalled: %q, want i1-1's alone", r.stalled)
	}
	got := r.stalled[0]
	for _, want := range []string{"i1-1: its connections frozen", "heads waiting: s1@7 seq ", " PENDING (attempts 1, epoch of its mark 7, updated ",
		"its goroutines in ", "its metrics in "} {
		if !strings.Contains(got, want) {
			t.Errorf("report %q lacks %q", got, want)
		}
	}
	for _, not := range []string{"NEW", "s4@", "s5@", "s6@"} {
		if strings.Contains(got, not) {
			t.Errorf("report %q names %q, which did not wait for the instance", got, not)
		}
	}
	tag := "stalled-" + start.since.Add(5*time.Second).UTC().Format("150405.000")
	for file, want := range map[string]string{
		"i1-1." + tag + ".goroutines.txt": "goroutine 1 [select]:\n",
		"i1-1." + tag + ".metrics.txt":    "batchclaim_queuer_in_flight 3\n",
	} {
		if b, err := os.ReadFile(filepath.Join(r.logDir, file)); err != nil || string(b) != want {
			t.Errorf("%s: %q, %v", file, b, err)
		}
	}
	if !slices.Contains(start.halted, "s4") || !slices.Contains(start.halted, "s7") {
		t.Errorf("halted at the start: %q, want s4 and s7 among them", start.halted)
	}
}

// spreadOut waits for the slots to hold every service_id evenly: not while one is
// unclaimed, nor while the counts differ by more than one, nor while an instance no slot runs
// holds some.
func TestSpreadOut(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.NewPool(t)
	exec := execer(t, pool)
	a, b, gone := uuid.New(), uuid.New(), uuid.New()
	registerLive(exec, a, b, gone)
	exec(`INSERT INTO batchclaim.service_id_claims (service_id) SELECT 's' || g FROM generate_series(1, 4) g`)
	r := &run{pool: pool, instances: []*instance{{name: "i1-1", id: a, state: stateRunning}, {name: "i2-1", id: b, state: stateRunning}}}
	for _, c := range []struct {
		name  string
		claim string // the claims' holders, in service_id order: a, b, g(one) or - (nobody)
		even  bool
	}{
		{"one unclaimed", "aab-", false},
		{"three against one", "aaab", false},
		{"one held by an instance no slot runs", "aabg", false},
		{"two and two", "abab", true},
	} {
		for i, h := range c.claim {
			var holder *uuid.UUID
			switch h {
			case 'a':
				holder = &a
			case 'b':
				holder = &b
			case 'g':
				holder = &gone
			}
			exec(`UPDATE batchclaim.service_id_claims SET claimant = $1, epoch = epoch + 1 WHERE service_id = $2`, holder, fmt.Sprintf("s%d", i+1))
		}
		if got := r.spreadOut(ctx, 300*time.Millisecond); got != c.even {
			t.Errorf("%s: spreadOut = %v, want %v", c.name, got, c.even)
		}
	}
}
