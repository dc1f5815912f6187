// Package queuer is the per-instance loop: every renew interval it runs the claim cycle
// (package claims), then fetches the next batch of each claimed service_id and hands it to
// the submitter. Between cycles it fetches again whenever a submission ends or a batch
// changes state, so a service_id's next batch goes out as soon as its previous one is done.
//
// Order and policy, per service_id:
//
//   - Batches go out in seq order with at most one in flight ("one-round serial"): only the
//     oldest unfinished batch (the head) is ever considered. The next waits until the head is
//     COMMITTED or INVALID; VALID counts as done only where the ledger adapter says VALID
//     fixes the order (Config.SkipValid).
//   - NEW goes at once. DELAYED (back-pressure) goes once its next_attempt_at has passed.
//   - UNKNOWN is not failure: the head is resubmitted only after UnknownAnswers consecutive
//     UNKNOWN answers from the ledger or after UnknownGrace, and always before any newer
//     batch (it is still the head).
//   - INFLIGHT left by a previous owner (or by this instance before it was fenced) is adopted
//     as UNKNOWN, so the ledger is asked before anything is sent again.
//   - INVALID is terminal and never resubmitted; with halt-on-invalid the service_id stops.
//
// Fetching is bounded (Config.FetchLimit service_ids a fetch, and never more than the idle
// workers) and fair: round-robin, each fetch starting after the service_id handed out last. All time
// comparisons (next_attempt_at, the age of an UNKNOWN) are made by the database clock.
package queuer
