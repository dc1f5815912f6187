// Package failovercmd is `batchclaim failover`, on patterns/failover: an owner-token lock and
// best-replica failover of a shard. `failover node` runs one node of a shard: it registers
// every heartbeat interval, renews the primary lease or follows the recorded primary,
// consumes its command queue and, as a replica, takes the failover lock when the primary is
// silent past its patience. `failover demo` runs a shard of four such processes of this
// binary on a scratch database, SIGKILLs and SIGSTOPs primaries and an orchestrating replica
// mid-failover, then audits the recorded history: no two primaries at once, the most
// up-to-date live replica chosen, no failover orphaned, no command lost.
package failovercmd
