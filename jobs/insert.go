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
	if args == nil {
		return Stored{}, fmt.Errorf("jobs: nil arguments")
	}
	kind := args.Kind()
	if kind == "" {
		return Stored{}, errNoKind
	}
	payload, err := json.Marshal(args)
	if err != nil {
		return Stored{}, fmt.Errorf("jobs: encode the arguments of kind %q: %w", kind, err)
	}
	return ingest.Enqueue(ctx, q, key, id, payload, append(opts[:len(opts):len(opts)], ingest.Kind(kind))...)
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
