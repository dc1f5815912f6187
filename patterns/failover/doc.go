// Package failover keeps one primary per shard of replicated nodes, coordinated only
// through Postgres: nodes register themselves, replicas watch the primary's heartbeat, and
// when it stops, one replica takes the shard's failover lock (package lock), picks the most
// up-to-date live replica, records the decision and sends each node its command through a
// per-node queue in the database.
//
// # The source design
//
// The auto-failover design of a key-value store this package comes from works like this:
// every node rewrites a record every N seconds in a central store (node_id, address, role,
// primary_node_id, last_updated as a UNIX timestamp, and last_txn_id, its progress). Each
// replica checks the primary's last_updated with a patience that differs from node to node,
// so that rarely two start at once. The one whose patience runs out first takes a lock with
// `SET <primary_id>_FAILOVER <unique-value> NX EX 60`, picks the replica with the highest
// last_txn_id, pushes "become primary" onto that replica's queue and `REPLICAOF <ip> <port>`
// onto the others' (LPUSH; the replicas wait with BLPOP <node_id>_queue 5), and deletes the
// old primary's record; if the old primary comes back it re-creates it.
//
// # This package
//
// Tables: failover_nodes (the records above; last_updated is the database's now()),
// failover_shards (the decision: primary and epoch), failover_roles (each node's role
// changes; a primary row is also the primary's lease), failover_decisions with
// failover_decision_nodes (each decision and the registrations it saw), failover_commands
// (the queues). Every node runs Node.Run:
//
//   - Heartbeat, every HeartbeatInterval (N), in one transaction: read the shard's decision
//     FOR SHARE; if it names this node at an epoch where this node took over, renew the
//     primary lease (lease_until = now() + PrimaryLease); if it moved past this node, become a
//     replica of the named primary; rewrite the node's record.
//   - Watch, as a replica: if the primary's last lease renewal (or, while a newly chosen
//     primary has not yet taken over, the decision itself) is older than this node's
//     patience by the database clock, run Failover. Patience is Config.Patience plus a random
//     share of PatienceJitter drawn once per node.
//   - Failover: take the lock failover:<shard>, keep it renewed, and in one transaction fenced
//     by it (lock.Fence) and holding the shard row FOR UPDATE: if an open decision exists
//     whose new primary is alive, resume it; otherwise, if the current primary's lease has
//     run out, copy the shard's registrations, pick the live one with the highest progress
//     (other than the failed primary), set the shard to (new primary, epoch + 1) and record
//     the decision. Then, fenced again, push promote onto the new primary's queue and
//     REPLICAOF onto every other live node's, NOTIFY them, wait up to ConfirmTimeout for
//     the new primary's row at the new epoch, mark the decision completed, delete the old
//     primary's record if it is still silent, and release the lock.
//   - Commands: each node LISTENs on failover_commands and, on a notification for it or
//     every PollInterval, pops its queue oldest first: SELECT ... FOR UPDATE SKIP LOCKED, then
//     UPDATE consumed_at, in the same transaction that applies the command. A promote is
//     applied only if the shard's decision still names the node at that epoch (it writes the
//     node's primary row and starts its lease); a command of an epoch older than the node's
//     is consumed and ignored: a node acts on the highest epoch it has seen.
//
// # What differs from the source design, and why
//
//   - One clock. The source design compares each node's clock with last_updated, a
//     timestamp another node wrote with its own clock; skew between them moves every
//     failover. Here all liveness and lease arithmetic happens in SQL with the database's
//     now(); a node keeps only a monotonic local deadline for its own lease.
//   - A primary lease, not only a heartbeat. Noticing that a primary is silent does not stop
//     it: a paused primary wakes up and goes on writing. Here a primary may act only while its
//     lease runs (locally: PrimaryLease - Margin after it sent its last successful renewal),
//     a renewal succeeds only while the decision still names it (the shard row is read FOR
//     SHARE in the same transaction), and a new decision is recorded only after the old
//     lease has ended by the database clock. So two primaries never act at one database
//     instant, and an old primary that comes back sees the newer epoch on its next heartbeat
//     and becomes a replica.
//   - A fenced lock. The source design's `SET NX EX 60` lets a slow orchestrator carry on
//     after its 60 seconds, when another may have taken the lock. Here every step an
//     orchestrator writes runs in a transaction that first checks its lock (token and epoch,
//     not expired) and holds the lock row FOR SHARE, so a stale orchestrator's writes are
//     refused; see package lock.
//   - A durable decision that can be resumed. In the source design an orchestrator that dies
//     after taking the lock leaves nothing but the lock; the others wait for EX 60 and start
//     over, and one that dies halfway through its commands leaves the shard split. Here the
//     decision (new primary, new epoch) is recorded in one transaction before any command,
//     commands are stored once per (node, epoch, kind), and the next orchestrator resumes the
//     open decision, or supersedes it with a newer epoch if its new primary died too.
//   - One lock per shard, not per failed primary, so that two failovers of one shard (the
//     second one after the new primary failed as well) never run at once.
//   - The queue is a table, woken by LISTEN/NOTIFY, with polling as the fallback for a lost
//     notification or a broken listening connection; a command is consumed exactly once and
//     applied in the same transaction, so a node that dies in between loses nothing.
//   - Dead candidates. Only nodes whose record is younger than Patience are chosen or sent
//     commands; a dead replica with a high last_txn_id is passed over.
//
// # The leases
//
// The orchestrator's failover lock is kept by lock.KeepAlive, which is internal/lease's
// renewal loop with its local deadline; its end cancels the failover. The primary's own lease
// (its failover_roles row) is not: it is renewed by the heartbeat, in the one transaction
// that also reads the shard's decision FOR SHARE and rewrites the node's record, so that a
// renewal succeeds only while the decision still names the node; and nothing runs under it
// that a watchdog could cancel: the embedder asks State().Acting, which compares its local
// deadline (PrimaryLease - Margin from the heartbeat's send) on the monotonic clock.
//
// # Timing rules
//
// Defaults: N = 1s, PrimaryLease = 3s, Patience = 5s (+ up to 2.5s jitter), LockTTL = 10s,
// ConfirmTimeout = Patience, PollInterval = 1s. New checks N <= PrimaryLease/3 (three tries
// to renew before the lease ends), Patience > PrimaryLease + N (a replica does not give up on
// a primary whose lease still runs), LockTTL >= 3N.
//
// Check audits a shard's history for the demo and the tests: two primaries at one database
// instant, a decision that passed over a more up-to-date live node, a failover lock left to
// expire with no completed failover after it, and commands never consumed by a live node.
// docs/patterns.md puts this package beside the source design.
package failover
