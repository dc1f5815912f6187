package submitter_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/submitter"
)

// errNoSuchAccount is a failure that no retry can fix.
var errNoSuchAccount = errors.New("no such account")

// A Submitter is a job: it says with its Result's verdict what became of it. A plain error
// is retried with backoff in a job runner (node.Config without Statuses); a verdict says more:
// Discard gives up at once, Retry with RetryAfter asks for a delay of its own, Done finishes.
func ExampleSubmitterFunc() {
	charge := submitter.SubmitterFunc(func(ctx context.Context, b batchclaim.Batch) (batchclaim.Result, error) {
		status, err := post(ctx, b.Payload)
		switch {
		case errors.Is(err, errNoSuchAccount):
			return batchclaim.Result{Verdict: batchclaim.Discard, Detail: err.Error()}, nil
		case err != nil:
			return batchclaim.Result{}, err // retried after a backoff
		case status == http.StatusTooManyRequests:
			return batchclaim.Result{Verdict: batchclaim.Retry, HTTPStatus: status, RetryAfter: 30 * time.Second}, nil
		}
		return batchclaim.Result{Verdict: batchclaim.Done, HTTPStatus: status}, nil
	})
	for _, payload := range []string{"ok", "busy", "unknown-account", "timeout"} {
		r, err := charge.Submit(context.Background(), batchclaim.Batch{Payload: []byte(payload)})
		if err != nil {
			fmt.Println(payload, "error:", err)
			continue
		}
		fmt.Println(payload, r.Verdict)
	}
	// Output:
	// ok done
	// busy retry
	// unknown-account discard
	// timeout error: context deadline exceeded
}

// post stands for the job's real work, e.g. a call to a payment service.
func post(_ context.Context, payload []byte) (int, error) {
	switch string(payload) {
	case "busy":
		return http.StatusTooManyRequests, nil
	case "unknown-account":
		return 0, errNoSuchAccount
	case "timeout":
		return 0, context.DeadlineExceeded
	}
	return http.StatusOK, nil
}
