package ingest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/internal/db"
	"github.com/batchclaim/batchclaim/internal/tracing"
	"github.com/batchclaim/batchclaim/pgdb"
)

// Job is one job (batch) for EnqueueMany: Enqueue's arguments.
type Job struct {
	ServiceID string
	BatchID   string // the job's id, unique within its service_id; empty: none (Enqueue)
	Payload   []byte
	Options   []EnqueueOption // RunAt, MaxAttempts, Kind, Timeout
}

// MaxEnqueueMany bounds the jobs of one EnqueueMany call.
const MaxEnqueueMany = 100_000

// EnqueueMany stores many jobs, of one service_id or many, in one statement: what Enqueue
// does for each, all or nothing. Each service_id's jobs are stored after every job of it
// committed before, in the order they have in jobs (their seq and their place in the key's
// queue follow it), and other enqueues of those service_ids wait for the statement's
// transaction to end. Jobs of different service_ids have no order between them: the
// statement stores them grouped by service_id, so their seqs need not follow the list.
//
// The result has one Stored per job, in the order given: New false for a duplicate, a
// (ServiceID, BatchID) stored before or earlier in jobs, which is skipped (its options too)
// and reported with the Seq of the job stored under that pair. A job with an empty BatchID
// has no id: it is always stored, never a duplicate, and known by its Seq; such jobs cost the
// database less, since only an id is registered to find its repeats (docs/performance.md).
// A job whose pair a concurrent transaction stored, invisible to this one's snapshot (a
// REPEATABLE READ transaction), fails the call. Any error stores nothing (pass a pgx.Tx to
// make it atomic with your own writes as well); an error inside a transaction leaves that
// transaction to be rolled back.
//
// Given a pool, the call is a transaction of its own (the statement, and for jobs stored
// before it the lookup of their seqs) and the holders of the service_ids are woken just
// after it commits; given a transaction, when that transaction commits (once per service_id
// either way).
//
// The statement takes one entry of the server's lock table per distinct service_id (the
// enqueue lock) until its transaction ends. The server holds max_locks_per_transaction x
// (max_connections + max_prepared_transactions) entries in all (6,400 with Postgres's
// defaults), shared by every session: a call with more distinct service_ids than are free
// fails ("out of shared memory") and stores nothing; store such a set in several
// transactions. The locks are taken in one order (by the lock's key), so two EnqueueMany
// calls never deadlock with each other; a transaction of yours that enqueues several
// service_ids one at a time while another transaction stores them in bulk may, and Postgres
// then ends one of them (SQLSTATE 40P01, safe to retry).
func EnqueueMany(ctx context.Context, q pgdb.Querier, jobs []Job) (_ []Stored, err error) {
	ctx, span := tracing.Start(ctx, tracing.Enqueue, tracing.Batches.Int(len(jobs)))
	defer func() { tracing.End(span, err) }()
	if len(jobs) == 0 {
		return []Stored{}, nil
	}
	if len(jobs) > MaxEnqueueMany {
		return nil, fmt.Errorf("%d jobs in one call; at most %d", len(jobs), MaxEnqueueMany)
	}
	return insertMany(ctx, q, jobs, false)
}

// insertMany is EnqueueMany, and with ledger true the ingest API's list of ledger batches:
// each batch id is then registered across service_ids too, and one stored under another
// service_id fails the call with ErrBatchIDTaken (a takenError naming it).
//
// Given a pool, it runs in a transaction of its own: the statement stores the new jobs and
// the lookups that follow it (the seqs of jobs stored before, the owner of a refused ledger
// id) may fail, and an error must leave nothing stored, as EnqueueMany promises, not new
// jobs that the caller, told it failed, stores a second time. The holders are woken once it
// committed.
func insertMany(ctx context.Context, q pgdb.Querier, jobs []Job, ledger bool) ([]Stored, error) {
	if !commitsAlone(q) {
		out, _, err := insertManyIn(ctx, q, jobs, ledger, false)
		return out, err
	}
	var out []Stored
	var woken []string
	b := pgdb.InSchema(pgdb.Unwrap(q).(*pgxpool.Pool), pgdb.SchemaOf(q))
	err := pgdb.InTx(ctx, b, pgx.TxOptions{}, func(tx pgx.Tx) (err error) {
		out, woken, err = insertManyIn(ctx, tx, jobs, ledger, true) // tx runs in q's schema (InSchema)
		return err
	})
	if err != nil {
		return nil, err
	}
	if len(woken) > 0 {
		wakeAfterCommit(ctx, q, woken...)
	}
	return out, nil
}

// insertManyIn is insertMany on q. With wakeAfterCommit the statement does not notify the
// holders (its transaction's caller wakes them after the commit: woken are their
// service_ids, once each); without, its transaction's commit does.
func insertManyIn(ctx context.Context, q pgdb.Querier, jobs []Job, ledger, wakeAfterCommit bool) (_ []Stored, woken []string, _ error) {
	// An option's array stays empty when no job sets it: the statement reads an empty one as
	// none for every job, and the call sends and encodes nothing for it.
	p := db.BatchesInsertManyParams{
		Ledger:     ledger,
		ServiceIds: make([]string, len(jobs)), BatchIds: make([]string, len(jobs)), Payloads: make([][]byte, len(jobs)),
		RunAts: []time.Time{}, MaxAttempts: []int32{}, Kinds: []string{}, TimeoutsMs: []int64{},
		WakeAfterCommit: wakeAfterCommit,
	}
	for i, j := range jobs {
		if err := batchclaim.ValidateServiceID(j.ServiceID); err != nil {
			return nil, nil, fmt.Errorf("job %d: %w", i, err)
		}
		if j.BatchID == "" && ledger {
			return nil, nil, fmt.Errorf("job %d: batch id is empty", i)
		}
		o, err := resolveOptions(j.Options)
		if err != nil {
			return nil, nil, fmt.Errorf("job %d: %w", i, err)
		}
		p.ServiceIds[i], p.BatchIds[i], p.Payloads[i] = j.ServiceID, j.BatchID, j.Payload
		if p.Payloads[i] == nil {
			p.Payloads[i] = []byte{} // stored empty, not NULL
		}
		if o.runAt != nil {
			setAt(&p.RunAts, len(jobs), i, *o.runAt) // the zero time stands for none
		}
		if o.maxAttempts != nil {
			setAt(&p.MaxAttempts, len(jobs), i, *o.maxAttempts) // 0 stands for none
		}
		if o.kind != nil {
			setAt(&p.Kinds, len(jobs), i, *o.kind) // "" stands for none
		}
		if o.timeoutMs != nil {
			setAt(&p.TimeoutsMs, len(jobs), i, *o.timeoutMs) // 0 stands for none
		}
	}
	qs := db.New()
	rows, err := qs.BatchesInsertMany(ctx, q, p)
	if err != nil {
		return nil, nil, fmt.Errorf("store jobs: %w", err)
	}
	type pair struct{ serviceID, batchID string }
	seqs := make(map[pair]int64, len(rows))
	// The rows of the jobs without an id, by service_id in seq order, which is the order of
	// those jobs in the list (the statement draws each service_id's seqs in it).
	var idless map[string][]int64
	for _, r := range rows {
		if r.BatchID == "" {
			if idless == nil {
				idless = map[string][]int64{}
			}
			idless[r.ServiceID] = append(idless[r.ServiceID], r.Seq)
			continue
		}
		seqs[pair{r.ServiceID, r.BatchID}] = r.Seq
	}
	for _, s := range idless {
		slices.Sort(s)
	}
	out := make([]Stored, len(jobs))
	var before []int // jobs stored before this call
	for i, j := range jobs {
		if j.BatchID == "" {
			s := idless[j.ServiceID]
			if len(s) == 0 { // cannot happen: every job without an id is stored
				return nil, nil, fmt.Errorf("job %d (service_id %q, no id): not among the rows stored", i, j.ServiceID)
			}
			out[i] = Stored{Seq: s[0], New: true}
			idless[j.ServiceID] = s[1:]
			continue
		}
		k := pair{j.ServiceID, j.BatchID}
		seq, ok := seqs[k]
		switch {
		case !ok:
			before = append(before, i)
		case seq > 0:
			out[i] = Stored{BatchID: j.BatchID, Seq: seq, New: true}
			seqs[k] = -seq // a later job of the same pair is its duplicate
		default:
			out[i] = Stored{BatchID: j.BatchID, Seq: -seq}
		}
	}
	if len(before) > 0 {
		if err := lookUpStored(ctx, qs, q, jobs, before, out, ledger); err != nil {
			return nil, nil, err
		}
		// Reported stored only once as durable as new ones would be (durable.go).
		if err := durableRepeat(ctx, q); err != nil {
			return nil, nil, err
		}
	}
	if wakeAfterCommit {
		seen := make(map[string]struct{}, len(rows))
		for _, r := range rows {
			if _, ok := seen[r.ServiceID]; !ok {
				seen[r.ServiceID] = struct{}{}
				woken = append(woken, r.ServiceID)
			}
		}
	}
	return out, woken, nil
}

// setAt sets (*a)[i] to v, first making *a n zero values long if it is still empty.
func setAt[T any](a *[]T, n, i int, v T) {
	if len(*a) == 0 {
		*a = make([]T, n)
	}
	(*a)[i] = v
}

// errStoredUnseen: a job's pair was stored by a transaction this one's snapshot does not see.
var errStoredUnseen = errors.New("stored by a concurrent transaction this transaction's snapshot does not see")

// lookUpStored fills in the Seq of the jobs (by index) that were stored before. With ledger,
// a job whose pair is not stored had its batch id refused: stored under another service_id.
func lookUpStored(ctx context.Context, qs *db.Queries, q pgdb.Querier, jobs []Job, idx []int, out []Stored, ledger bool) error {
	svcs, ids := make([]string, len(idx)), make([]string, len(idx))
	for n, i := range idx {
		svcs[n], ids[n] = jobs[i].ServiceID, jobs[i].BatchID
	}
	rows, err := qs.BatchesLookupMany(ctx, q, db.BatchesLookupManyParams{ServiceIds: svcs, BatchIds: ids})
	if err != nil {
		return fmt.Errorf("look up stored jobs: %w", err)
	}
	type pair struct{ serviceID, batchID string }
	seqs := make(map[pair]int64, len(rows))
	for _, r := range rows {
		seqs[pair{r.ServiceID, r.BatchID}] = r.Seq
	}
	for _, i := range idx {
		seq, ok := seqs[pair{jobs[i].ServiceID, jobs[i].BatchID}]
		if !ok && ledger {
			return ledgerTaken(ctx, qs, q, jobs[i].ServiceID, jobs[i].BatchID)
		}
		if !ok {
			return fmt.Errorf("job %d (service_id %q, batch %q): %w", i, jobs[i].ServiceID, jobs[i].BatchID, errStoredUnseen)
		}
		out[i] = Stored{BatchID: jobs[i].BatchID, Seq: seq}
	}
	return nil
}
