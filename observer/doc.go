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
// known (PENDING, VALID, UNKNOWN), grouped per service_id, with bounded concurrency, and
// records the answers; it ignores ids it did not ask about.
//
// Events lets an embedder hear about status changes, claims gained and lost, and instances
// presumed dead.
package observer
