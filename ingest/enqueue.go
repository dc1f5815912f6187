package ingest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/dlt"
	"github.com/batchclaim/batchclaim/internal/db"
	"github.com/batchclaim/batchclaim/internal/tracing"
	"github.com/batchclaim/batchclaim/pgdb"
)

// Stored is one batch as Enqueue left it.
type Stored struct {
	BatchID string // empty for a job stored without an id
	Seq     int64  // its place in the service_id's order
	New     bool   // false when it was already stored (idempotent repeat)
}

// ErrBatchIDTaken: a ledger batch id is already stored under another service_id. A ledger
// batch id (the batch header signature) is global on the ledger, so one batch never belongs to
// two service_ids.
var ErrBatchIDTaken = errors.New("ledger batch id already stored under another service_id")

// Enqueue stores one batch of serviceID with opaque payload bytes, after every batch of that
// service_id committed before it: enqueues of one service_id are serialized (a
// transaction-scoped advisory lock), so the per-service order is the order of the commits.
// batchID must be unique per service_id; storing the same (serviceID, batchID) again changes
// nothing (its options included). An empty batchID is no id: the job is stored every time,
// never deduplicated, and known by its Seq; it costs the database less than one with an id,
// whose pair is registered to find its repeats. Run it in a transaction (pass a pgx.Tx) to
// store the batch atomically with other writes; other enqueues of serviceID then wait for
// that transaction to end, so keep it short. The instance holding serviceID is woken when
// that transaction commits. Given a *pgxpool.Pool, the statement is a transaction of its own
// and the holder is woken just after its commit, by a statement that carries the wake-ups of
// every enqueue that committed on the pool meanwhile (Enqueue does not wait for it; see
// wake.go). Options: RunAt, MaxAttempts, Kind, Timeout.
func Enqueue(ctx context.Context, q pgdb.Querier, serviceID, batchID string, payload []byte, opts ...EnqueueOption) (Stored, error) {
	o, err := resolveOptions(opts)
	if err != nil {
		return Stored{}, err
	}
	st, err := enqueue(ctx, q, serviceID, batchID, payload, o)
	if err == nil && !st.New {
		err = durableRepeat(ctx, q)
	}
	return st, err
}

// resolveOptions applies opts and checks the result.
func resolveOptions(opts []EnqueueOption) (enqueueOptions, error) {
	var o enqueueOptions
	for _, opt := range opts {
		opt(&o)
	}
	if o.maxAttempts != nil && *o.maxAttempts < 1 {
		return o, fmt.Errorf("max attempts must be at least 1, got %d", *o.maxAttempts)
	}
	if o.timeoutMs != nil && *o.timeoutMs < 0 {
		return o, fmt.Errorf("timeout must not be negative, got %dms", *o.timeoutMs)
	}
	if o.timeoutMs != nil && *o.timeoutMs == 0 {
		o.timeoutMs = nil
	}
	if o.kind != nil && len(*o.kind) > batchclaim.MaxKindLen {
		return o, fmt.Errorf("kind is %d bytes; at most %d", len(*o.kind), batchclaim.MaxKindLen)
	}
	return o, nil
}

// An EnqueueOption sets something about one job at Enqueue.
type EnqueueOption func(*enqueueOptions)

type enqueueOptions struct {
	runAt       *time.Time
	maxAttempts *int32
	kind        *string
	timeoutMs   *int64
}

// RunAt makes the job wait until t, by the database clock: it is not handed out before then.
// Its service_id's later jobs wait behind it (the order per service_id holds). A zero t means
// now.
func RunAt(t time.Time) EnqueueOption {
	return func(o *enqueueOptions) {
		if !t.IsZero() {
			o.runAt = &t
		}
	}
}

// MaxAttempts sets the job's own attempt limit, in place of the runner's
// (node.Config.MaxAttempts): the outcome of its n-th attempt, if a retry or unknown, makes it
// DISCARDED. n must be at least 1.
func MaxAttempts(n int) EnqueueOption {
	return func(o *enqueueOptions) {
		v := int32(min(max(n, -1), math.MaxInt32))
		o.maxAttempts = &v
	}
}

// Kind stores the job's kind, the name of its arguments' type (package jobs sets it; a
// jobs.Workers dispatches on it). Empty means none.
func Kind(kind string) EnqueueOption {
	return func(o *enqueueOptions) {
		if kind != "" {
			o.kind = &kind
		}
	}
}

// Timeout sets the job's own timeout: each attempt's context ends d after it starts, and an
// attempt that ends by it is a failure that says it timed out (retried like any other). It
// comes before a kind's timeout (jobs.Timeouter) and is bounded by the runner's submit timeout
// (the claim engine's MaxSubmission). d is rounded up to a millisecond; zero means none of its
// own.
func Timeout(d time.Duration) EnqueueOption {
	return func(o *enqueueOptions) {
		ms := int64((d + time.Millisecond - 1) / time.Millisecond)
		o.timeoutMs = &ms
	}
}

func enqueue(ctx context.Context, q pgdb.Querier, serviceID, batchID string, payload []byte, o enqueueOptions) (st Stored, err error) {
	ctx, span := tracing.Start(ctx, tracing.Enqueue)
	if span.IsRecording() { // the attributes cost allocations a call: built only for a span that keeps them
		span.SetAttributes(tracing.ServiceID.String(serviceID), tracing.BatchID.String(batchID))
	}
	defer func() {
		if span.IsRecording() {
			span.SetAttributes(tracing.Seq.Int64(st.Seq), tracing.New.Bool(st.New))
		}
		tracing.End(span, err)
	}()
	if err := batchclaim.ValidateServiceID(serviceID); err != nil {
		return Stored{}, err
	}
	if payload == nil {
		payload = []byte{} // a job without a payload: stored empty, not NULL
	}
	// BatchInsert also creates the service_id's claim row, under the enqueue lock (see
	// claims.Config.DropIdleAfter for why it must be under the lock).
	// A statement that commits alone wakes the holder after its commit (see wake.go).
	qs := db.New()
	alone := commitsAlone(q)
	// Ledger false: the ingest API's ledger batches are stored by enqueueBatches.
	row, err := qs.BatchInsert(ctx, q, db.BatchInsertParams{ServiceID: serviceID, BatchID: batchID, Payload: payload,
		RunAt: o.runAt, MaxAttempts: o.maxAttempts, Kind: o.kind, TimeoutMs: o.timeoutMs, WakeAfterCommit: alone})
	if err == nil {
		if alone {
			wakeAfterCommit(ctx, q, serviceID)
		}
		return Stored{BatchID: batchID, Seq: row.Seq, New: true}, nil
	}
	if !pgdb.NoRows(err) {
		return Stored{}, fmt.Errorf("store batch: %w", err)
	}
	if batchID == "" {
		// A job without an id is never a repeat: only a schema older than this binary's
		// (before migration 22) registers its empty id and skips the next one.
		return Stored{}, errors.New("a job without an id was not stored: the database's schema is older than this binary's (run batchclaim migrate up)")
	}
	// A conflict: the same batch stored before (an idempotent repeat).
	old, err := qs.BatchLookup(ctx, q, db.BatchLookupParams{ServiceID: serviceID, BatchID: batchID})
	if err == nil {
		return Stored{BatchID: batchID, Seq: old.Seq}, nil
	}
	if !pgdb.NoRows(err) {
		return Stored{}, fmt.Errorf("look up stored batch: %w", err)
	}
	return Stored{}, fmt.Errorf("batch %s of %q: %w", batchID, serviceID, errStoredUnseen)
}

// ledgerTaken is the error of a ledger batch id refused for serviceID: it is stored under
// another service_id, or by a transaction this one's snapshot does not see.
func ledgerTaken(ctx context.Context, qs *db.Queries, q pgdb.Querier, serviceID, batchID string) error {
	other, err := qs.BatchLedgerOwner(ctx, q, batchID)
	if err != nil {
		return &takenError{batchID, fmt.Errorf("batch %s: %w (stored by a concurrent transaction)", batchID, ErrBatchIDTaken)}
	}
	return &takenError{batchID, fmt.Errorf("batch %s: %w %q (seq %d); not stored under %q", batchID, ErrBatchIDTaken, other.ServiceID, other.Seq, serviceID)}
}

// takenError is ErrBatchIDTaken with the batch it is about. Its message names the other
// service_id, for the operator's logs; the ingest API does not send it to the client, to
// whom the other service_id may belong to someone else.
type takenError struct {
	batchID string
	err     error
}

func (e *takenError) Error() string { return e.err.Error() }
func (e *takenError) Unwrap() error { return e.err }

// EnqueueBatchList stores every batch of a serialized BatchList for serviceID, in list
// order, each as a one-batch BatchList keyed by its header signature. Nothing is stored if the
// list does not decode. A batch already stored under another service_id is refused with
// ErrBatchIDTaken. Given a pool, each MaxEnqueueMany batches of the list are a transaction of
// their own: an error stores nothing of the part it came in and leaves the parts before it
// stored. Pass a pgx.Tx to make the whole list atomic (and nothing stored on error).
func EnqueueBatchList(ctx context.Context, q pgdb.Querier, serviceID string, list []byte) ([]Stored, error) {
	if err := batchclaim.ValidateServiceID(serviceID); err != nil {
		return nil, err
	}
	batches, err := dlt.SplitBatchList(list)
	if err != nil {
		return nil, err
	}
	return enqueueBatches(ctx, q, serviceID, batches)
}

// enqueueBatches stores decoded batches of serviceID in order (see EnqueueBatchList): one
// statement for each MaxEnqueueMany of them, as EnqueueMany does, so that a list of thousands
// of batches costs a few round trips rather than one per batch. In a transaction a statement
// also carries at most maxStatementBytes of ids and payloads (one larger batch goes alone),
// since the driver holds about three copies of a statement's parameters while it encodes and
// sends them: what storing a list holds stays about three times maxStatementBytes, however
// many small batches the list has, and not a multiple of the list. On a pool the parts stay
// MaxEnqueueMany batches, each its own transaction, as documented.
func enqueueBatches(ctx context.Context, q pgdb.Querier, serviceID string, batches []dlt.Batch) ([]Stored, error) {
	out := make([]Stored, 0, len(batches))
	inTx := !commitsAlone(q)
	for len(batches) > 0 {
		n, size := 0, 0
		for n < len(batches) && n < MaxEnqueueMany {
			size += len(serviceID) + len(batches[n].ID) + len(batches[n].List)
			if inTx && n > 0 && size > maxStatementBytes {
				break
			}
			n++
		}
		chunk := batches[:n]
		batches = batches[n:]
		jobs := make([]Job, len(chunk))
		for i, b := range chunk {
			jobs[i] = Job{ServiceID: serviceID, BatchID: b.ID, Payload: b.List}
		}
		stored, err := insertMany(ctx, q, jobs, true)
		if err != nil {
			return nil, err
		}
		out = append(out, stored...)
	}
	return out, nil
}

// maxStatementBytes bounds the ids (service_ids and batch ids) and payloads of one statement
// of enqueueBatches in a transaction.
const maxStatementBytes = 1 << 20

// StoreMemory bounds what the driver holds while one POST /batches request of at most
// maxBody bytes is stored, outside the ingest memory budget: the encoded statement and the
// message it is copied into. Either a batch as large as the body goes alone (about twice its
// size), or a statement carries at most maxStatementBytes of small batches' ids and payloads
// (about three times that, with the encoding's growth).
func StoreMemory(maxBody int64) int64 { return 2 * max(maxBody, 2*maxStatementBytes) }
