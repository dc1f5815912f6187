package batchclaim_test

import (
	"context"
	"fmt"
	"time"

	"github.com/batchclaim/batchclaim"
)

// A job that is not ready yet snoozes: it returns SnoozeFor(d) (or the verdict Snooze with
// RetryAfter d). The submitter reads the delay from the error, wrapped or not; the job
// becomes DELAYED for d and its attempt does not count against its limit.
func ExampleSnoozeFor() {
	job := func(_ context.Context, b batchclaim.Batch) (batchclaim.Result, error) {
		if len(b.Payload) == 0 {
			return batchclaim.Result{}, fmt.Errorf("report %s: input not there yet: %w", b.BatchID, batchclaim.SnoozeFor(30*time.Second))
		}
		return batchclaim.Result{Verdict: batchclaim.Done}, nil
	}
	_, err := job(context.Background(), batchclaim.Batch{BatchID: "daily"})
	d, ok := batchclaim.SnoozeDelay(err)
	fmt.Println(ok, d, batchclaim.Snooze.State())
	// Output: true 30s DELAYED
}
