// Package lock is an owner-token lock with a time to live, kept in one Postgres table
// (owner_locks), for work that one process at a time may do: only the process that took the
// lock can renew or release it, and if that process dies the lock frees itself when its TTL
// passes.
//
// # The source design
//
// The auto-failover design this package comes from takes its lock in a key-value store with
//
//	SET <PRIMARY_ID>_FAILOVER <unique-value> NX EX 60
//
// NX makes the lock exclusive, the unique value lets only its creator delete it, and EX 60
// frees it if the creator crashes.
//
// # This package
//
// Acquire inserts the lock's row, or takes it over if it is free or its expiry has passed,
// in one statement (INSERT ... ON CONFLICT DO UPDATE ... WHERE expired). It draws a random
// 128-bit token from crypto/rand and sets epoch = epoch + 1. A Lease carries the name, the
// token and the epoch. Renew moves the expiry to now() + TTL and Release frees the lock, each
// only if the row still holds the same token and epoch (and, for Renew, has not expired): a
// wrong or old token changes nothing and the call returns an error wrapping ErrNotHeld, which
// wraps batchclaim.ErrClaimLost. KeepAlive renews every third of the TTL until its context
// ends or the lock is lost. Acquisitions and releases are logged in owner_lock_events
// (History), renewals are not.
//
// # What differs from the source design, and why
//
//   - One clock. Expiry is stored and compared in SQL with the database's now(); a process
//     never compares its own clock with a stored time. Locally a Lease has only a
//     conservative monotonic Deadline: the TTL counted from when the last successful
//     acquisition or renewal was sent.
//   - Fencing. A TTL lock alone cannot stop a holder that was paused (GC, SIGSTOP, a slow
//     network) past its TTL from writing after somebody else took the lock: when it wakes up
//     it still believes it holds it. So every acquisition gets an epoch that is larger than
//     every earlier one for that name and is never reused (rows are never deleted; a release
//     only clears the token). Fence checks the lease inside the caller's own transaction and
//     locks the row FOR SHARE, so that no new acquisition commits before the caller's writes
//     do; outside the database, the epoch is a fencing token a resource can compare.
//   - Renewal. The source design has no renewal: an orchestrator slower than 60 seconds
//     loses its lock without knowing. Here the holder renews, and a renewal after expiry is
//     refused even if nobody has taken the lock yet, because the holder cannot know that.
//
// # The lease
//
// KeepAlive is internal/lease's renewal loop: a renewal every TTL/3, each bounded by TTL/3
// and by the lease's local deadline (TTL - Margin from the send of the last successful
// renewal), so KeepAlive returns by that deadline even while a renewal hangs; the caller
// cancels the work the lock protects when it returns.
//
// The shard failover in package failover is built on this lock; docs/patterns.md puts both
// beside the source design.
package lock
