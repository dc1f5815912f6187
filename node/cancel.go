package node

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/observer"
	"github.com/batchclaim/batchclaim/pgdb"
)

// cancelChannelPrefix is the channel a Cancel of a running job notifies the instance running
// it on (BatchCancel), with the job's seq as payload.
const cancelChannelPrefix = "batchclaim_cancel_"

// cancelChannel is the channel cancels of the jobs id runs are notified on.
func cancelChannel(id uuid.UUID) string {
	return cancelChannelPrefix + strings.ReplaceAll(id.String(), "-", "")
}

// running is the part of submitter.Pool the canceller needs.
type running interface {
	Calls() map[int64]int
	CancelJob(seq int64, attempt int, cause error) bool
}

// canceller passes cancels of running jobs on to their Submit calls. It looks when the waker
// hears a cancel notification (kick) and, as a fallback for one missed, every interval while
// jobs run: one statement reads the requests against the jobs whose calls run, by primary
// key, and each request's call is cancelled with its reason as the cause.
type canceller struct {
	db       pgdb.Querier
	instance uuid.UUID
	calls    running
	every    time.Duration
	kicks    chan struct{}
	log      *slog.Logger
}

func newCanceller(q pgdb.Querier, instance uuid.UUID, calls running, every time.Duration, log *slog.Logger) *canceller {
	return &canceller{db: q, instance: instance, calls: calls, every: every, kicks: make(chan struct{}, 1), log: log}
}

// kick asks for a look now (a cancel notification arrived, or the listening connection came
// back and one may have been missed).
func (c *canceller) kick() {
	select {
	case c.kicks <- struct{}{}:
	default:
	}
}

// run looks at every kick and every interval until ctx ends.
func (c *canceller) run(ctx context.Context) {
	t := time.NewTicker(c.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.kicks:
		case <-t.C:
		}
		if _, err := c.check(ctx); err != nil && ctx.Err() == nil {
			c.log.Warn("could not read cancel requests of running jobs; looking again soon", "error", err)
		}
	}
}

// check reads the cancel requests against the running calls and cancels those calls; it
// returns how many it cancelled. No call running: no statement.
func (c *canceller) check(ctx context.Context) (int, error) {
	calls := c.calls.Calls()
	if len(calls) == 0 {
		return 0, nil
	}
	ctx, cancel := context.WithTimeout(ctx, max(c.every, time.Second))
	defer cancel()
	reqs, err := observer.CancelRequests(ctx, c.db, c.instance, calls)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, r := range reqs {
		if c.calls.CancelJob(r.Seq, r.Attempt, batchclaim.CancelCause(r.Reason)) {
			n++
			c.log.Info("cancel of a running job passed on to it", "seq", r.Seq, "attempt", r.Attempt, "reason", r.Reason)
		}
	}
	return n, nil
}
