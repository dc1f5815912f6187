package jobs

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/batchclaim/batchclaim/ingest"
	"github.com/batchclaim/batchclaim/pgdb"
)

// Stored is a job as Insert left it: its id, its place (Seq) and whether it is new (false for
// a repeat of a job stored before).
type Stored = ingest.Stored

// An InsertOption sets something about one job at Insert (ingest.EnqueueOption: node's and
// ingest's options will do too).
type InsertOption = ingest.EnqueueOption

// Insert stores a job of args' kind under key, with args as JSON, after every job of key
// committed before it: the jobs of one key run one at a time, in this order. id is the job's
// id, unique within its key: inserting the same id again changes nothing and returns the job
// stored first (New false), which makes an insert safe to repeat. An empty id is none: the job
// is stored every time, never deduplicated, and known by its Seq (River's job id); it costs
// the database less than one with an id (see ingest.Enqueue). Pass a pgx.Tx as q to store the job atomically with your own writes (River's
// InsertTx): it exists, and the instance holding key runs it, only if that transaction
// commits. Other inserts of key wait for the transaction to end, so keep it short. Options:
// RunAt, MaxAttempts, Timeout.
func Insert(ctx context.Context, q pgdb.Querier, key, id string, args Args, opts ...InsertOption) (Stored, error) {
	payload, opts, err := encode(args, opts)
	if err != nil {
		return Stored{}, err
	}
	return ingest.Enqueue(ctx, q, key, id, payload, opts...)
}

// InsertManyParams is one job of InsertMany: Insert's arguments.
type InsertManyParams struct {
	Key     string
	ID      string // unique within Key; empty: none (Insert)
	Args    Args
	Options []InsertOption
}

// InsertMany stores many jobs, of one key or many, in one statement (River's InsertMany and
// InsertManyFast): what Insert does for each, all or nothing. Each key's jobs are stored
// after every job of it committed before, in the order they have in params. The result has
// one Stored per job, in that order; a job whose id is stored already, or earlier in params,
// is skipped and reported with New false. Jobs without an id cost the database less (see
// Insert). Pass a pgx.Tx as q to store them atomically with your own writes. It is
// ingest.EnqueueMany, with each job's kind and its arguments as JSON; at most
// ingest.MaxEnqueueMany jobs a call.
func InsertMany(ctx context.Context, q pgdb.Querier, params []InsertManyParams) ([]Stored, error) {
	many := make([]ingest.Job, len(params))
	for i, p := range params {
		payload, opts, err := encode(p.Args, p.Options)
		if err != nil {
			return nil, fmt.Errorf("job %d: %w", i, err)
		}
		many[i] = ingest.Job{ServiceID: p.Key, BatchID: p.ID, Payload: payload, Options: opts}
	}
	return ingest.EnqueueMany(ctx, q, many)
}

// encode returns args as JSON, and opts with the kind of args after them.
func encode(args Args, opts []InsertOption) ([]byte, []InsertOption, error) {
	if args == nil {
		return nil, nil, fmt.Errorf("jobs: nil arguments")
	}
	kind := args.Kind()
	if kind == "" {
		return nil, nil, errNoKind
	}
	payload, err := json.Marshal(args)
	if err != nil {
		return nil, nil, fmt.Errorf("jobs: encode the arguments of kind %q: %w", kind, err)
	}
	return payload, append(opts[:len(opts):len(opts)], ingest.Kind(kind)), nil
}

// RunAt makes the job wait until t, by the database clock (River's ScheduledAt); the later
// jobs of its key wait behind it. See ingest.RunAt.
func RunAt(t time.Time) InsertOption { return ingest.RunAt(t) }

// MaxAttempts sets the job's own attempt limit, in place of node.Config.MaxAttempts. See
// ingest.MaxAttempts.
func MaxAttempts(n int) InsertOption { return ingest.MaxAttempts(n) }

// Timeout sets the job's own timeout, which comes before its worker's (Timeouter). See
// ingest.Timeout.
func Timeout(d time.Duration) InsertOption { return ingest.Timeout(d) }
