// Package observer records what happens to batches and finds out what the ledger did with
// them.
//
// Recorder makes every write about a batch, a set at a time: Take reads the heads of a queuer
// round and marks the NEW ones that go in flight in the same statement, Mark marks the other
// heads the round hands out (retries, resubmissions) in one statement, Finish records POST outcomes (those that arrive
// while another is being written are written together next, a group commit, by one of their
// callers: a caller whose write committed returns at once and never writes for others, so no
// service_id's next batch waits while the load lasts), and
// RecordStatuses records a poll's answers (and Adopt the adoption of batches left in flight)
// in one statement. Each statement is fenced per row through the claim row (claimant, epoch
// and the registry row's nonce, under a shared lock on the claim row that no takeover can
// pass), changes each batch with a conditional UPDATE (expected state and service_id; for
// outcomes also the epoch and the attempt that marked it, so a late outcome of an earlier
// attempt is refused), appends the attempt and transition log rows in the same statement, and
// has committed before the call returns: recording is durable and synchronous. A POST's row of
// the attempt log is written once, whole, by the outcome's statement: the mark keeps the
// attempt's reason and from-state on the batch row meanwhile, and the adoption of a batch whose
// outcome nobody recorded writes that lost POST's row from them. An outcome that commits its
// batch (a job that succeeded) writes no row: COMMITTED is final, so the batch row keeps that
// attempt for good, and batch_history and the status page show it from there; a successful job
// costs two writes of its batch row and nothing else. No claim row
// is written per batch: a claim is busy while its head batch is INFLIGHT under it. A stale row
// is refused alone and reported as batchclaim.ErrClaimLost for that row; a row whose batch
// moved on is skipped (batchclaim.ErrStateChanged) and its claim kept; the others are written.
//
// An outcome that frees its service_id (COMMITTED, or INVALID without a halt) may chain:
// with batchclaim.Outcome.Chain the same statement marks the service_id's next batch in
// flight, if it is NEW, and Finish returns it, so one statement per batch carries a
// service_id's backlog.
//
// Poller asks the ledger about batches of claimed service_ids whose outcome is not yet
// known (PENDING, VALID, UNKNOWN) and records the answers that change something, all of a
// poll in one statement; a poll that learns nothing writes nothing. It ignores ids it did not
// ask about. Each poll reads at most MaxBatches of them, continuing in (service_id, seq) order
// where the previous poll stopped, so every one is asked about within ceil(open/MaxBatches)
// polls however many are open; it packs their ids into requests of at most IDsPerRequest (15,
// the Sawtooth limit for one GET /batch_statuses) whatever their service_id, with bounded
// concurrency. With a StatusWaiter it asks with the ledgers' wait parameter, so an outcome is
// learnt as soon as the ledger has it; it is woken when a batch is accepted and polls again at
// once after a poll that learnt something.
//
// Retention deletes finished batches (with their attempts and transitions) older than an
// age, in short chunks, on one instance at a time (a transaction-scoped advisory lock per
// chunk); see docs/operations.md.
//
// Events lets an embedder hear about status changes, claims gained and lost, and instances
// presumed dead.
package observer
