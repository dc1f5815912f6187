// Package election keeps one primary per role among many instances, through one Postgres
// database: the HPC Pack SQL heartbeat design (its single-type model and its "utype" model,
// where each instance marks the type it will work as), built with a fencing token and a
// deadline that ends before anyone else can be elected.
//
// # The source design
//
// With a heartbeat interval I and a timeout T > 2I, a table holds one heartbeat entry
// {uuid, timestamp} (or {uuid, utype, timestamp}, one per type). UpdateHeartBeat(uuid)
// overwrites the entry with {uuid, sql_time}; a different uuid may overwrite it only if
// sql_time - old_timestamp > T, and of two racing updates the later is discarded (optimistic
// concurrency). GetPrimary returns the entry's uuid if sql_time - timestamp <= T. Each
// scheduler calls GetPrimary every I; when it is empty it calls UpdateHeartBeat, and once
// GetPrimary returns its own uuid it works as primary, calling UpdateHeartBeat and
// GetPrimary every I. If GetPrimary returns anything else, or "didn't return in (T-I) secs",
// it exits and restarts. Other services on the same host call the scheduler's CheckPrimary
// every I and exit when it says false or does not answer for T - I.
//
// # What is built
//
// Roles are the source's types: election_terms has one row per role, many roles in one
// table, at most one live primary each. An Elector stands for a set of roles (Config.Roles):
//
//   - Its lease is one row of election_members, renewed every I with expires_at = now() + T
//     by the database clock: one row update per interval however many roles it holds. A term
//     is live while its holder's lease is (GetPrimary).
//   - A role whose term has no live holder is taken by a conditional UPDATE that sets
//     epoch = epoch + 1 (ElectionTermsAcquire): the UPDATE's own RETURNING is the answer, so
//     there is no second GetPrimary round trip before acting. A standby looks every I, and
//     also right after the current primary's lease would expire (the database says how long
//     it still runs), so a successor is elected within about T of the primary's last renewal.
//   - The primary steps down on its own, cancelling the context passed to Config.OnElected,
//     once T - I has passed since it *sent* its last renewal that the database confirmed.
//     The database stamped that renewal no earlier than it was sent, so the lease it sees
//     runs at least until send + T: the primary has stopped at least I before anyone else
//     can be elected, however long the renewal sat in a queue and however long the process
//     was paused. CheckPrimary answers from this local view.
//   - The epoch of a term is a fencing token. Fence (and FenceTerm) lock the role's term row
//     FOR SHARE inside the caller's transaction after checking that the term is still the
//     live one: a takeover is an UPDATE of that row, so it waits until the fenced
//     transaction has ended, and a write from an old term is refused with an error
//     wrapping batchclaim.ErrClaimLost. The lease lives in a separate row so that a
//     fenced transaction never holds up its own primary's heartbeat. Fence also sets
//     idle_in_transaction_session_timeout = I for the transaction: a primary paused in the
//     middle of a fenced transaction would otherwise hold the term row, and with it every
//     successor, for as long as the pause lasts.
//
// # Where this differs from the source, and why
//
//   - The deadline. "Didn't return in (T-I) secs" measured from when an answer arrived
//     would let an answer delayed in the network extend a primary's belief beyond its
//     lease. Measuring from the send of the confirmed renewal, with a monotonic clock, is
//     what makes "steps down before anyone else is elected" hold. No node ever compares its
//     own wall clock with a stored time: every expiry is judged by the database's now().
//   - Fencing. The source has a lock without a token: a primary that was paused (GC, SIGSTOP,
//     a full disk) can wake after its successor was elected and act before it notices. Here
//     every term has an epoch that is never reused (term rows are never deleted), and the
//     writes that only the primary may make go through Fence, so the database refuses them
//     from an old term whatever the process believes.
//   - Stepping down without restarting. "Exit itself and restart" becomes: cancel the term's
//     context, forget the lease, and join again. Joining resigns whatever terms the database
//     still holds in the old lease's name, so a term never survives its holder's step-down:
//     the next term, even of the same instance, has a new epoch.
//   - The race between a late renewal and a takeover. The source has the heartbeat and the
//     term in one row, so optimistic concurrency covers it. Here they are two rows (so that
//     fencing does not block heartbeats); a takeover therefore also writes the expired
//     holder's lease row (evicts it) in the same REPEATABLE READ transaction, so that a
//     renewal that raced with it and a takeover can never both commit (ElectionMembersEvict).
//   - The extended model's case 4b ("GetPrimary(utype) returns another type") cannot occur:
//     the role is the row's key.
//   - Graceful stop resigns: when Run's context ends, terms are cancelled, and once their
//     OnElected callbacks have returned they are resigned so that a standby is elected at
//     once rather than after T.
//   - Other services on the same host follow the primary through `batchclaim primary --role
//     R` (exit status 0 when this host's instance is the live primary) or the
//     `GET /primary?role=R` endpoint of `batchclaim election run`. Both are advisory: a
//     service that writes must fence its writes with the epoch.
//
// # The lease
//
// The local side of the lease is internal/lease's Deadline with a window of T - I: the
// deadline counted from the send of the last confirmed join or renewal, and a watchdog that
// steps every term down when it passes, even while a renewal hangs. The renewal is not
// internal/lease's loop: it runs in the elector's own cycle, on the elector's own connection,
// together with the campaign for free roles, and its answer lists the terms to reconcile.
// Each cycle's statements are bounded by max(I, (T - I)/2), so that a renewal lost in a
// stalled connection leaves room for one more, on a new connection, before the deadline.
//
// # Timing
//
// T > 2I is checked by New. A healthy primary renews every I, so it has at least one retry
// before its deadline at T - I. After a primary dies, is paused or is cut off, a standby is
// elected within T + I of the failure (and in practice within about T plus one statement),
// and the old primary stopped acting at least I before that. Every election and resignation
// is recorded in election_events, with the database's timestamp, for tests and operators.
//
// docs/patterns.md puts the source design's words beside what is built.
package election
