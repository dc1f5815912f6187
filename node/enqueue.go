package node

import (
	"context"
	"time"

	"github.com/batchclaim/batchclaim/ingest"
	"github.com/batchclaim/batchclaim/observer"
	"github.com/batchclaim/batchclaim/pgdb"
)

// Stored is one batch (job) as Enqueue left it: its id, its place in its service_id's order,
// and whether it is new (false for a repeat of a batch already stored).
type Stored = ingest.Stored

// Enqueue stores one batch (a job, for a job runner) of serviceID with opaque payload bytes,
// after every batch of that service_id committed before it, so that the per-service order is
// the order of the commits. batchID is unique per service_id: storing the same one again
// changes nothing; an empty one is none (the job is stored every time, see ingest.Enqueue).
// Pass a pgx.Tx as q to store the batch atomically with your own writes (the instance holding
// the service_id is woken when that transaction commits; given a pool, just after the
// enqueue's own commit); other enqueues of serviceID wait for it to end, so keep it short.
// Options: RunAt, MaxAttempts, Timeout. It is ingest.Enqueue, here so that an embedder needs
// one import.
func Enqueue(ctx context.Context, q pgdb.Querier, serviceID, batchID string, payload []byte, opts ...EnqueueOption) (Stored, error) {
	return ingest.Enqueue(ctx, q, serviceID, batchID, payload, opts...)
}

// An EnqueueOption sets something about one job at Enqueue (ingest.EnqueueOption).
type EnqueueOption = ingest.EnqueueOption

// RunAt makes the job wait until t, by the database clock; its service_id's later jobs wait
// behind it. See ingest.RunAt.
func RunAt(t time.Time) EnqueueOption { return ingest.RunAt(t) }

// MaxAttempts sets the job's own attempt limit in place of Config.MaxAttempts. See
// ingest.MaxAttempts.
func MaxAttempts(n int) EnqueueOption { return ingest.MaxAttempts(n) }

// Timeout sets the job's own timeout: each attempt's context ends d after it starts (at most
// the submit timeout), and an attempt that ends by it is a failure that says it timed out.
// See ingest.Timeout.
func Timeout(d time.Duration) EnqueueOption { return ingest.Timeout(d) }

// Change is a batch's state change made by Cancel or Retry (observer.Change).
type Change = observer.Change

// Cancel cancels a job that has not run and certainly never took effect (NEW, with a run-at
// time ahead or not, or DELAYED): it becomes CANCELLED and its service_id goes on with the
// next job. Another state: batchclaim.ErrStateChanged. See observer.Cancel.
func Cancel(ctx context.Context, q pgdb.Querier, seq int64, reason string) (Change, error) {
	return observer.Cancel(ctx, q, seq, reason)
}

// Retry runs a DISCARDED, CANCELLED or INVALID job again, at the back of its key's queue, or
// a DELAYED one now. See observer.Retry.
func Retry(ctx context.Context, q pgdb.Querier, seq int64) (Change, error) {
	return observer.Retry(ctx, q, seq)
}

// Job is one job for EnqueueMany (ingest.Job).
type Job = ingest.Job

// EnqueueMany stores many jobs, of one service_id or many, in one statement, all or nothing:
// each service_id's jobs after every job of it committed before, in the order given.
// Duplicates are skipped and reported (New false). Pass a pgx.Tx to store them with your own
// writes. See ingest.EnqueueMany, also for the lock-table entry it takes per service_id.
func EnqueueMany(ctx context.Context, q pgdb.Querier, jobs []Job) ([]Stored, error) {
	return ingest.EnqueueMany(ctx, q, jobs)
}
