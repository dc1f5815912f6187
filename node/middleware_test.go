package node_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/node"
	"github.com/batchclaim/batchclaim/submitter"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
	"github.com/batchclaim/batchclaim/testkit/testutil"
)

type hookKey struct{}

// The middleware chain runs around every job, first outermost: before it (a Before hook may
// put a value in the job's context, or fail the attempt without running the job), after it
// with the Result its outcome is recorded from, and on its error, with the claim (key, epoch)
// and the attempt in reach.
func TestMiddlewareAroundEveryJob(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url := dbtest.NewDB(t)
	admin := newPool(t, url)
	for _, key := range []string{"fails-once", "before-fails"} {
		if _, err := node.Enqueue(ctx, admin, key, "job", nil); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	seen := map[string][]string{} // key -> what the chain and the job saw, in order
	note := func(key, format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		seen[key] = append(seen[key], fmt.Sprintf(format, args...))
	}
	var badClaims []string
	outer := submitter.MiddlewareFunc(func(ctx context.Context, j submitter.Job, next func(context.Context) (batchclaim.Result, error)) (batchclaim.Result, error) {
		if c, ok := batchclaim.ClaimFrom(ctx); !ok || c.ServiceID != j.Claim.ServiceID || c.Epoch != j.Claim.Epoch || j.Claim.Epoch < 1 {
			mu.Lock()
			badClaims = append(badClaims, fmt.Sprintf("%+v in ctx, %+v in the job", c, j.Claim))
			mu.Unlock()
		}
		note(j.Batch.ServiceID, "outer before attempt %d (%s)", j.Batch.Attempts+1, j.Reason)
		r, err := next(ctx)
		note(j.Batch.ServiceID, "outer after %s", r.Verdict)
		return r, err
	})
	hooks := submitter.Hooks{
		Before: func(ctx context.Context, j submitter.Job) (context.Context, error) {
			note(j.Batch.ServiceID, "before attempt %d", j.Batch.Attempts+1)
			if j.Batch.ServiceID == "before-fails" && j.Batch.Attempts == 0 {
				return nil, errors.New("not ready")
			}
			return context.WithValue(ctx, hookKey{}, "from Before"), nil
		},
		Error: func(ctx context.Context, j submitter.Job, err error) {
			note(j.Batch.ServiceID, "error %v", err)
		},
		After: func(ctx context.Context, j submitter.Job, r batchclaim.Result, err error) {
			note(j.Batch.ServiceID, "after %s %q", r.Verdict, r.Detail)
		},
	}
	job := submitter.SubmitterFunc(func(ctx context.Context, b batchclaim.Batch) (batchclaim.Result, error) {
		note(b.ServiceID, "job attempt %d sees %v", b.Attempts+1, ctx.Value(hookKey{}))
		if b.ServiceID == "fails-once" && b.Attempts == 0 {
			return batchclaim.Result{}, errors.New("boom")
		}
		return batchclaim.Result{Verdict: batchclaim.Done}, nil
	})
	runJobs(t, url, "a", job, func(c *node.Config) {
		c.Middleware = []submitter.Middleware{outer, hooks}
		c.Claims.Expiry1, c.Claims.Expiry2 = 3*time.Second, 12*time.Second // a loaded machine's pauses do not fence it
	})
	testutil.WaitFor(t, time.Minute, "both jobs committed", func() bool {
		var open int
		err := admin.QueryRow(ctx, `SELECT count(*) FROM batchclaim.batches WHERE state <> 'COMMITTED'`).Scan(&open)
		return err == nil && open == 0
	})
	mu.Lock()
	defer mu.Unlock()
	want := map[string][]string{
		"fails-once": {
			"outer before attempt 1 (first)", "before attempt 1", "job attempt 1 sees from Before",
			"error boom", `after retry "boom"`, "outer after retry",
			"outer before attempt 2 (retry)", "before attempt 2", "job attempt 2 sees from Before",
			`after done ""`, "outer after done",
		},
		"before-fails": {
			"outer before attempt 1 (first)", "before attempt 1", "error not ready", `after verdict(0) ""`, "outer after retry",
			"outer before attempt 2 (retry)", "before attempt 2", "job attempt 2 sees from Before",
			`after done ""`, "outer after done",
		},
	}
	for key, w := range want {
		if got := strings.Join(seen[key], "\n"); got != strings.Join(w, "\n") {
			t.Errorf("%s:\n%s\nwant\n%s", key, got, strings.Join(w, "\n"))
		}
	}
	if len(badClaims) > 0 {
		t.Errorf("the claim in reach differs from the job's: %v", badClaims)
	}
	var lastErr string
	if err := admin.QueryRow(ctx, `SELECT error FROM batchclaim.submission_attempts WHERE service_id = 'before-fails'`).Scan(&lastErr); err != nil || lastErr != "not ready" {
		t.Errorf("the attempt Before failed was recorded with %q (%v), want its error", lastErr, err)
	}
}
