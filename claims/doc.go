// Package claims is the claim engine: it shares service_ids among many identical instances
// through one Postgres database, so that each service_id has at most one owner at a time and
// an owner that dies, hangs or is cut off is replaced. Instances never talk to each other.
//
// # Tables
//
// instances is the registry. Each row is also the instance's lease: expiry_1 and expiry_2,
// both computed by the database as now() + T1 and now() + T2 whenever the instance renews.
// service_id_claims has one row per service_id: claimant (NULL when free), epoch, claimed_at,
// submitting_since (for users of the engine alone, see below) and active_at (the idle clock of
// DropIdleAfter). A claim's effective expiries are its claimant's lease, so keeping 10,000
// claims alive costs one row update per renew interval, not 10,000; claim rows are written
// only when ownership changes (and active_at when a service_id's last unfinished batch
// finishes), never per batch. The view service_id_claims_effective shows each claim with its
// effective expiries and whether it is busy. claim_events is an append-only history of
// ownership changes (acquired, released, voided), one row each.
//
// # Life cycle of a claim
//
//	free --acquire (new epoch)--> held --renewals--> held ...
//	held --owner's lease past expiry_1, not busy-----------------> voided (free)  [fast path]
//	held --owner's lease past expiry_2, whatever it was doing-----> voided (free)  [slow path]
//	held --graceful stop or fair-share surplus, epoch checked----> released (free)
//	held --no unfinished batch for DropIdleAfter (if set)--------> dropped (row deleted; the
//	      next enqueue creates it again)
//	free --no unfinished batch for DropIdleAfter (if set)--------> dropped (by any live instance)
//
// Every instance runs the same cycle every renew interval R (Engine.Cycle):
//
//  1. Renew its lease: one UPDATE of its own instances row. Under Engine.Run the lease is not
//     renewed by the cycle at all but by a lease loop of its own, every R on a connection of
//     its own, from Run until Shutdown: nothing the instance does (a cycle, a fetch, a
//     submission, a full pool) can delay a renewal, and a stopping instance keeps its lease
//     while its submissions drain. An engine driven by calls to Cycle alone renews in each
//     Cycle.
//  2. Survey, in one statement: whether its registry row is still its own (nonce), the live
//     instances (lease still in phase one) ordered by id, the number K of service_ids and of
//     free ones, whether any claim waits to be voided, a fingerprint (count, sum of epochs) of
//     its own claims, and how many of them are idle past DropIdleAfter. Target = K/N, plus one
//     for the first K mod N instances. The targets add up to K, so at rest no claim is free
//     and no two instances hold counts that differ by more than one. Counting K reads every
//     row, so a survey counts it only when it may have changed (some row is free, a surplus
//     release may follow, the engine dropped rows, every tenth cycle) and otherwise keeps the
//     last count.
//  3. Only if the survey says there is something to do: void expired claims (the two phases
//     above), take free claims up to its target, give back idle surplus claims if it has
//     been over its target for two cycles in a row (so a newcomer gets work within a few
//     cycles without keys churning on every small fluctuation) and make the busy surplus
//     yield (Engine.Yielding: its holder starts no new job on it, so a later cycle gives it
//     back once its running job ends; a backlog never leaves a claim idle), drop idle claim
//     rows (idle free rows before acquiring, its own idle claims after). Each is a READ
//     COMMITTED statement over a bounded chunk (Config.ChunkSize) that skips rows
//     another transaction has locked (FOR UPDATE SKIP LOCKED) instead of waiting for them,
//     run again as many chunks as needed; a deadlock or lock timeout is retried with
//     jittered backoff.
//  4. If the fingerprint differs from its in-memory set, or it changed something, read its
//     own claims (the database, not memory, says what it holds) and make its in-memory set
//     equal, reporting gains and losses (Config.OnGained, Config.OnLost). Each held Claim
//     carries a context that is cancelled the moment the claim is lost.
//
// An instance with nothing to change thus sends two statements per renew interval: the
// renewal and the survey.
//
// # The two expiry phases
//
// A healthy owner renews well within T1. Past expiry_1 it is probably dead, unless it is in
// the middle of a submission that is taking long: so past expiry_1 a claim may be taken only
// if it is not busy (the fast path, for an owner that is neither submitting nor renewing).
// Past expiry_2 it may be taken regardless (the slow path): by then any submission the owner
// could have started has ended or been cancelled by the owner itself, because
// T2 >= D + S + margin (see below).
//
// A claim is busy while its owner has a POST in flight: the service_id's head batch (its
// oldest unfinished one, VALID ones aside) is INFLIGHT under the claim's owner and epoch. It is
// read from the batch, so the data path writes no claim row per batch. A user of the engine
// alone, with work that is not in the batches table, marks a claim busy with BeginSubmission
// (submitting_since) and clears it with EndSubmission.
//
// The owner marks a batch in flight in a statement that holds a shared lock on the claim row
// until it commits. A takeover (voiding, or giving surplus back) is a transaction of two
// statements: the first locks the claim rows FOR UPDATE, skipping rows others have locked;
// the second, whose snapshot is taken after those locks, judges busy again and frees only the
// claims still void. So the two cannot both succeed: either the owner's mark committed before
// the takeover's lock and the takeover sees the batch in flight and leaves the claim alone, or
// the mark comes after it, waits for the takeover's commit, finds the claim gone and marks
// nothing.
//
// # Epochs and fencing
//
// Every acquisition draws the claim's epoch from one global sequence
// (service_id_claim_epochs), so an epoch is never reused, even by a claim row deleted as idle
// and created again, and the epochs of one service_id strictly increase over time. A Claim
// is the pair (service_id, epoch). Every write an owner makes about the service_id is
// conditional on (claimant = this instance, epoch = the claim's epoch): the data path's set
// writes lock the claim rows FOR SHARE, Fence does the same inside the caller's transaction,
// so that no takeover can commit between the check and the caller's commit, and
// BeginSubmission and EndSubmission are such UPDATEs.
// Zero rows matched means batchclaim.ErrClaimLost: the instance drops the claim, cancels its
// context (and with it any POST running for it) and stops working on the service_id. A
// delayed owner that comes back after a takeover therefore finds its epoch stale and can
// write nothing.
//
// # Locks
//
// Voiding and acquisition skip rows another transaction holds (FOR UPDATE SKIP LOCKED)
// rather than waiting for them. ConfigurePool sets, once per connection, lock_timeout = R
// (bounding any wait) and idle_in_transaction_session_timeout = T1/5 (the server ends the
// transaction of an instance that stalls in the middle of one, paused process or cut network,
// so its row locks never hold the other instances up for long); the few explicit transactions
// also call GuardTx, which sets the same per transaction, for pools not configured so. Lock
// timeouts are retried like deadlocks.
//
// # Keys that come and go
//
// With DropIdleAfter set, an owner deletes the claim rows of its service_ids that have no
// unfinished batch and no recorded POST outcome for that long, so that the engine's cost
// follows the keys with work rather than every key ever seen. The drop takes, without
// waiting, the same advisory lock an enqueue of the service_id holds while it creates the
// row and stores the batch, and then, in a second statement whose snapshot follows the lock,
// deletes only rows still without unfinished work: an enqueue either runs entirely before
// (and its batch is seen) or waits and creates the row again.
//
// Idle free rows (no claimant) are dropped the same way by any live instance, before it
// acquires anything, so that a row is never acquired only to be dropped: no epoch is drawn
// and no claim event written for it. While more idle free rows are left than one cycle
// drops, an instance acquires only free rows with unfinished work (found from the index of
// unfinished batches), and at most its part of them.
//
// # One clock
//
// All expiry arithmetic happens in SQL with the database's now(). An instance never
// compares its own wall clock with a stored time. Locally it keeps only a monotonic deadline:
// D after the moment it *sent* its last successful renewal. The database stamped that lease
// no earlier than the send, so the local deadline always ends before the database's
// expiry_1 (D < T1) even if the renewal sat in a network queue.
//
// # Self-fencing
//
// When the local deadline passes without a successful renewal (database unreachable, process
// stalled, network cut), the engine fences itself: Held returns nothing, BeginSubmission
// refuses, every claim's context is cancelled (which cancels in-flight POSTs) and the claims
// are reported lost with LossDeadline. When a renewal succeeds again, the next cycle re-reads
// its claims from the database and adopts those that are still in its name with the same
// epoch (nobody took them, so nothing was lost). The deadline and its watchdog are
// internal/lease's Deadline, the one the HA patterns' leases use; a renewal that succeeds
// after the fence starts its next life.
//
// # Timing rules
//
// With R the renew interval, D the local deadline, T1 and T2 the expiries, S the longest a
// submission may take, and the stop time and margin as configured (Config.Resolve checks
// them all at start and names the rule that fails):
//
//   - R <= T1/3: an owner gets at least three tries to renew before its claims can be taken.
//   - D >= 2R: one failed renewal alone does not fence an instance.
//   - D + stop time < T1: an instance that cannot renew has stopped starting submissions
//     before its idle claims can be taken on the fast path.
//   - T2 > T1, and T2 >= D + S + margin: a submission is started only before the local
//     deadline and lasts at most S, so it has ended before anybody may take the claim on the
//     slow path.
//
// Defaults are R = 5s, D = 20s, T1 = 30s, S = 60s, T2 = 120s. Knobs left unset follow from the
// ones set: T1 = 30s, R = min(5s, T1/6), D = 2/3 T1, T2 = 4 T1, stop time = margin = T1/10,
// S = min(60s, T2 - D - margin). So R = 500ms, T1 = 3s, T2 = 15s alone is a valid
// configuration.
//
// # Takeover times
//
// A claim of an instance that died idle is free once expiry_1 passes and is taken by the next
// cycle of an instance under its target: within T1 + R of the last renewal. A claim that was
// busy is taken within T2 + R. Graceful stop (Shutdown) releases claims at once.
//
// # After a failover
//
// The guarantees hold across a failover of the database only if what was committed on the old
// primary is on the new one (a synchronous standby). The failover guard (guard.go) checks it
// from what the cycle's survey returns: when the timeline changes, this instance's last
// committed renewal and the epochs it was granted must be there. If not, the instance takes
// no new work for good (Refusal says why) and moves the epoch sequence past the epochs it was
// granted. It takes none either while it reaches a former primary (an older timeline than one
// it wrote to) and, with Config.RequireSyncStandby, while the primary commits without a
// synchronous standby. A refusal drops the claims as a passed local deadline does; the lease
// goes on.
//
// docs/claims.md says the same with the reasons for each rule and the operator's view.
package claims
