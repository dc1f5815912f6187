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
// election.Elector, lock.Locker) instead of sleeping.
//
// docs/patterns.md puts each source design beside what is built, and says where and why each
// one differs.
package patterns
