package node_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/claims"
	"github.com/batchclaim/batchclaim/node"
	"github.com/batchclaim/batchclaim/observer"
	"github.com/batchclaim/batchclaim/submitter"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
	"github.com/batchclaim/batchclaim/testkit/testutil"
	"github.com/batchclaim/batchclaim/ui"
)

// keyJobs is a job runner's Submitter for the cancel tests: "long" and "stubborn" run until
// their context ends ("stubborn" then returns Done anyway), every other job is done at once.
// It notes the cause a job's context ended with, and any moment two jobs of a key ran at once.
type keyJobs struct {
	mu      sync.Mutex
	running map[string]int // key -> jobs of it running
	overlap []string
	causes  map[string]error // batch id -> context.Cause when it ended
	started chan string      // batch ids of the jobs that block, as they start
}

func newKeyJobs() *keyJobs {
	return &keyJobs{running: map[string]int{}, causes: map[string]error{}, started: make(chan string, 16)}
}

func (k *keyJobs) Submit(ctx context.Context, b batchclaim.Batch) (batchclaim.Result, error) {
	k.mu.Lock()
	if k.running[b.ServiceID]++; k.running[b.ServiceID] > 1 {
		k.overlap = append(k.overlap, b.ServiceID)
	}
	k.mu.Unlock()
	defer func() {
		k.mu.Lock()
		k.running[b.ServiceID]--
		k.mu.Unlock()
	}()
	if b.BatchID != "long" && b.BatchID != "stubborn" {
		return batchclaim.Result{Verdict: batchclaim.Done}, nil
	}
	k.started <- b.BatchID
	<-ctx.Done()
	k.mu.Lock()
	k.causes[b.BatchID] = context.Cause(ctx)
	k.mu.Unlock()
	if b.BatchID == "stubborn" {
		return batchclaim.Result{Verdict: batchclaim.Done}, nil
	}
	return batchclaim.Result{}, ctx.Err()
}

func (k *keyJobs) cause(id string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.causes[id]
}

// A Cancel of a running job reaches the job's context on the instance that runs it, whoever
// asks: node.Cancel on another instance's pool, or the status page's Cancel. The job ends
// CANCELLED with the reason once it returns, the next job of its key runs, and no two jobs of
// the key ever run at once. The request reaches the job by notification (the poll set to an
// hour here) or, without listening, by the instance's poll of its running jobs. A job that
// returns Done once cancelled is COMMITTED: it says its work took effect.
func TestCancelRunningJob(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		job    string // the job that blocks: long (ends with an error) or stubborn (Done)
		listen bool   // false: NoListen, the cancel is found by the poll alone
		http   bool   // cancel through the status page's API instead of node.Cancel
		want   batchclaim.State
	}{
		{name: "notified", job: "long", listen: true, want: batchclaim.StateCancelled},
		{name: "polled", job: "long", want: batchclaim.StateCancelled},
		{name: "status page", job: "long", listen: true, http: true, want: batchclaim.StateCancelled},
		{name: "done wins", job: "stubborn", listen: true, want: batchclaim.StateCommitted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			url := dbtest.NewDB(t)
			admin := newPool(t, url)
			jobs := newKeyJobs()
			blocking, err := node.Enqueue(ctx, admin, "k", tc.job, nil)
			if err != nil {
				t.Fatal(err)
			}
			next, err := node.Enqueue(ctx, admin, "k", "next", nil)
			if err != nil {
				t.Fatal(err)
			}
			pools := map[uuid.UUID]*pgxpool.Pool{}
			for _, name := range []string{"a", "b"} {
				pool := newPool(t, url)
				// Timings that a loaded machine keeps: a claim lost to a missed renewal would end
				// the attempt the cancel is for before the cancel reaches it.
				cc := claims.Config{Name: name, RenewInterval: 300 * time.Millisecond, Expiry1: 3 * time.Second, Expiry2: 12 * time.Second}
				cfg := node.Config{Claims: cc, Submitter: jobs, NoListen: !tc.listen,
					BackoffBase: 10 * time.Millisecond, BackoffMax: 50 * time.Millisecond, UnknownGrace: time.Second,
					Logger: slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))}
				n, err := node.New(dbtest.Open(t, pool, ""), cfg)
				if err != nil {
					t.Fatal(err)
				}
				if tc.listen {
					node.SetCancelPoll(n, time.Hour) // only the notification can deliver the cancel
				}
				runCtx, stop := context.WithCancel(context.Background())
				done := make(chan error, 1)
				go func() { done <- n.Run(runCtx) }()
				t.Cleanup(func() { stop(); <-done })
				pools[n.Engine().InstanceID()] = pool
			}
			defer func() {
				if t.Failed() {
					logRows(t, admin, `SELECT seq, batch_id, state, attempts, claimant, cancel_attempt, cancel_reason, last_error FROM batchclaim.batches ORDER BY seq`)
					logRows(t, admin, `SELECT * FROM batchclaim.batch_history ORDER BY at`)
				}
			}()
			select {
			case <-jobs.started:
			case <-time.After(30 * time.Second):
				t.Fatal("the blocking job never started")
			}
			var runner uuid.UUID
			if err := admin.QueryRow(ctx, `SELECT claimant FROM batchclaim.batches WHERE seq = $1 AND state = 'INFLIGHT'`, blocking.Seq).Scan(&runner); err != nil {
				t.Fatalf("the blocking job is not INFLIGHT: %v", err)
			}
			var other *pgxpool.Pool // the pool of the instance that does not run the job
			for id, p := range pools {
				if id != runner {
					other = p
				}
			}
			const reason = "operator: stop it"
			if tc.http {
				h, err := ui.New(dbtest.Open(t, other, ""), ui.Config{})
				if err != nil {
					t.Fatal(err)
				}
				mux := http.NewServeMux()
				h.Register(mux)
				srv := httptest.NewServer(mux)
				defer srv.Close()
				resp, err := http.Post(srv.URL+"/api/batches/"+strconv.FormatInt(blocking.Seq, 10)+"/cancel", "", nil)
				if err != nil {
					t.Fatal(err)
				}
				body := new(strings.Builder)
				_, _ = io.Copy(body, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK || !strings.Contains(body.String(), `"cancel_requested":true`) {
					t.Fatalf("POST cancel of the running job: %d %s", resp.StatusCode, body)
				}
			} else {
				c, err := node.Cancel(ctx, other, blocking.Seq, reason)
				if err != nil {
					t.Fatalf("cancel of the running job: %v", err)
				}
				if !c.CancelRequested || c.From != batchclaim.StateInflight || c.To != batchclaim.StateInflight {
					t.Fatalf("cancel of the running job: %+v; want a request, INFLIGHT -> INFLIGHT", c)
				}
			}
			testutil.WaitFor(t, 30*time.Second, "both jobs finished", func() bool {
				s1, _ := jobState(t, admin, blocking.Seq)
				s2, _ := jobState(t, admin, next.Seq)
				return batchclaim.State(s1).Terminal() && batchclaim.State(s2).Terminal()
			})
			if cause := jobs.cause(tc.job); !errors.Is(cause, batchclaim.ErrCancelled) {
				t.Errorf("the job's context ended with %v; want a cause that wraps ErrCancelled", cause)
			} else if !tc.http && !strings.Contains(cause.Error(), reason) {
				t.Errorf("the job's cause %q does not say the reason %q", cause, reason)
			}
			var lastErr *string
			s, _ := jobState(t, admin, blocking.Seq)
			if err := admin.QueryRow(ctx, `SELECT last_error FROM batchclaim.batches WHERE seq = $1`, blocking.Seq).Scan(&lastErr); err != nil {
				t.Fatal(err)
			}
			if batchclaim.State(s) != tc.want {
				t.Fatalf("the cancelled job is %s (%v); want %s", s, lastErr, tc.want)
			}
			if tc.want == batchclaim.StateCancelled && !tc.http && (lastErr == nil || *lastErr != reason) {
				t.Errorf("the cancelled job's last error is %v; want %q", lastErr, reason)
			}
			if s, _ := jobState(t, admin, next.Seq); s != "COMMITTED" {
				t.Errorf("the key's next job is %s; want COMMITTED", s)
			}
			if first, last := firstStart(t, admin, next.Seq), finishedAt(t, admin, blocking.Seq); first.Before(last) {
				t.Errorf("the next job started at %s, before the cancelled one ended at %s", first, last)
			}
			jobs.mu.Lock()
			defer jobs.mu.Unlock()
			if len(jobs.overlap) > 0 {
				t.Errorf("two jobs of a key ran at once: %v", jobs.overlap)
			}
		})
	}
}

// An UNKNOWN job's last attempt may have taken effect: Cancel refuses it, saying why.
func TestCancelRefusesUnknown(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url := dbtest.NewDB(t)
	admin := newPool(t, url)
	job := submitter.SubmitterFunc(func(context.Context, batchclaim.Batch) (batchclaim.Result, error) {
		return batchclaim.Result{Verdict: batchclaim.Unknown, Detail: "the remote end did not answer"}, nil
	})
	st, err := node.Enqueue(ctx, admin, "k", "maybe", nil)
	if err != nil {
		t.Fatal(err)
	}
	runJobs(t, url, "a", job, func(c *node.Config) { c.UnknownGrace = time.Hour })
	testutil.WaitFor(t, 30*time.Second, "the job UNKNOWN", func() bool { s, _ := jobState(t, admin, st.Seq); return s == "UNKNOWN" })
	_, err = node.Cancel(ctx, admin, st.Seq, "no")
	if !errors.Is(err, batchclaim.ErrStateChanged) || !errors.Is(err, observer.ErrOutcomeUnknown) {
		t.Fatalf("cancel of an UNKNOWN job: %v; want ErrStateChanged and ErrOutcomeUnknown", err)
	}
	if s, _ := jobState(t, admin, st.Seq); s != "UNKNOWN" {
		t.Errorf("after the refused cancel the job is %s", s)
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}
