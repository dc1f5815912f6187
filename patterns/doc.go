// Package patterns holds no code: it is the directory of the five high-availability systems
// that stand beside the batch pipeline (claims, queuer, submitter, observer, ingest, node,
// dlt, ui) and share only its vocabulary and its database seam. They live apart so that a
// reader sees two products: the pipeline at the top level, and these designs here.
//
//	patterns/election      one primary per role (HPC Pack SQL heartbeat design)
//	patterns/lock          owner-token lock with a TTL (SET NX EX of a key-value store)
//	patterns/failover      best-replica shard failover on top of lock
//	patterns/heartbeat     active/standby missed-heartbeat events on top of election
//	patterns/singleflight  per-key single fetch with waiters (HA cache cluster design)
//
// # The claim engine's ideas, and where each system has them
//
// Package claims rests on four ideas. Each system here takes them as follows.
//
//   - A row with an owner. claims: an instances row per process and a claims row per
//     service_id. election: an election_members row per instance (its lease) and an
//     election_terms row per role. lock: an owner_locks row per name, owned by a random
//     token. failover: a failover_roles primary row per node and term, plus the shard's
//     failover lock. heartbeat: the election term of its role. singleflight: a
//     singleflight_entries row per key, whose holder has the fetch lease.
//   - A fencing epoch that only grows and is never reused. claims: the claim epoch, from one
//     sequence. election: the term epoch. lock: the acquisition epoch. failover: the shard
//     epoch (and the lock's for the orchestrator). heartbeat: the election term's epoch,
//     checked by election's Fence in every step. singleflight: the fetch epoch, checked by
//     the statement that stores a result.
//   - An expiry judged by the database clock alone. Every expiry above is written as
//     now() + a duration and compared with now() in SQL; no process compares its own clock
//     with a stored time.
//   - A local deadline on the monotonic clock, counted from when the last confirmed renewal
//     was sent, that ends before the database's expiry can come: past it the holder treats
//     its lease as lost and stops its work, even if it cannot reach the database. claims:
//     LocalDeadline. election: T - I. lock: TTL - Margin. failover: PrimaryLease - Margin.
//     singleflight: 2/3 LeaseTTL.
//
// Tests and drills move the database's view of time with ShiftDBTime (claims.Engine,
// election.Elector, lock.Locker) instead of sleeping; internal/dbclock is that hook, once.
//
// # One lease mechanism
//
// The local side of a lease is internal/lease: Deadline (the local deadline from the send of
// the last confirmed renewal, and a watchdog that runs a callback, cancelling the work, when
// it passes without one) and Keep (the renewal loop: every interval, each try bounded by a
// step timeout and by the deadline, a refused renewal ending it). Each package's doc.go says
// which lease it uses:
//
//   - lock: KeepAlive is Keep (TTL/3, window TTL - Margin).
//   - singleflight: a fetch's lease is Keep (RenewInterval, window 2/3 LeaseTTL); the
//     watchdog cancels the source call.
//   - election: Deadline (window T - I); its renewal stays in the elector's cycle, which
//     shares one connection and one answer with the campaign for roles.
//   - heartbeat: election's lease, for its active role.
//   - failover: lock.KeepAlive for the orchestrator's lock; the primary's lease is renewed
//     inside the heartbeat transaction that reads the shard's decision, and the embedder
//     polls it (State().Acting) rather than running work a watchdog could cancel.
//   - claims: Deadline (window D, by default 2/3 of T1) for the instance's lease, with a
//     renewal loop of its own (claims/lease.go), because it differs where Keep is strict.
//     It renews from Run until Shutdown (not until Run's context ends) on a connection it
//     dials itself, bounding the dial and the statement each by D, falls back to the pool
//     when the pool gives no config, and registers again when its row is gone. And it does
//     not stop at the deadline: the instance fences itself there (the watchdog drops every
//     claim), but its row lives until expiry_2 by the database clock, so a renewal that
//     succeeds later starts the deadline's next life and the claims are read again from the
//     database. The fence runs under the engine's lock and leaves the claims alone if such a
//     renewal started the next life first, so that a claim gained just after it is not
//     dropped for the old deadline.
//
// docs/patterns.md puts each source design beside what is built, and says where and why each
// one differs.
package patterns
