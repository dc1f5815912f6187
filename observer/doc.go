// Package observer records what happens to batches and finds out what the ledger did with
// them.
//
// Recorder makes every write about a batch: the in-flight mark before a submission, its
// outcome after, and each status the ledger reports. Each write runs in a transaction that
// first fences the claim (claims.Engine.Fence or BeginSubmission), then changes the batch
// with one conditional UPDATE (expected state; for outcomes also the epoch that marked it),
// appends to batch_transitions, and commits before returning: recording is durable and
// synchronous. A write by a stale owner matches nothing and returns batchclaim.ErrClaimLost.
//
// Poller asks the ledger about batches of claimed service_ids whose outcome is not yet
// known (PENDING, VALID, UNKNOWN) and records the answers that change something, one fenced
// transaction per service_id; it ignores ids it did not ask about. Each poll reads at most
// MaxBatches of them, continuing in (service_id, seq) order where the previous poll stopped,
// so every one is asked about within ceil(open/MaxBatches) polls however many are open; it
// packs their ids into requests of at most IDsPerRequest (15, the Sawtooth limit for one
// GET /batch_statuses) whatever their service_id, with bounded concurrency.
//
// Retention deletes finished batches (with their attempts and transitions) older than an
// age, in short chunks, on one instance at a time (a transaction-scoped advisory lock per
// chunk); see docs/operations.md.
//
// Events lets an embedder hear about status changes, claims gained and lost, and instances
// presumed dead.
package observer
