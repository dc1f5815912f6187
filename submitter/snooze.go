package submitter

import (
	"time"

	"github.com/batchclaim/batchclaim"
)

// retryIn is how long after its outcome j may run again if res leaves it DELAYED: for a
// Snooze exactly what the job asked for (its RetryAfter); otherwise the backoff of its
// counted attempts, or the server's Retry-After when that is longer. A snoozed attempt is not
// counted (the outcome's write raises the job's AttemptBase), so a job that snoozes and then
// fails backs off as if it had not snoozed.
func (p *Pool) retryIn(j Job, res batchclaim.Result) time.Duration {
	if res.Verdict == batchclaim.Snooze {
		return max(res.RetryAfter, 0)
	}
	return p.backoff(j.Batch.Attempts-j.Batch.AttemptBase, res.RetryAfter)
}
