// Package chaos drives real instances of the batchclaim binary against one Postgres and the
// ledger simulator, injects faults chosen from a seed, records what happened and checks the
// claim engine's and the pipeline's invariants afterwards. The command `batchclaim chaos` is
// a thin wrapper; docs/chaos.md explains each fault and invariant and how to replay a seed.
//
// A run owns a throwaway cluster (a primary with a synchronous standby, so that it can
// restart, terminate backends and fail over) unless it is given a database URL. Each instance
// reaches Postgres through its own TCP proxies, one per server, listed in a multi-host URL
// with target_session_attrs=read-write, so that its link can be cut, blackholed or delayed
// alone and a promoted standby is found without a restart.
//
// Faults run in two lanes: processes, links and Postgres one at a time (so that a slow
// takeover is blamed on one fault), and the ledger and concurrent clients beside them. A
// third lane carries out operators' and embedders' operations (Retry, Cancel, Cancel of a
// running batch, run-at,
// Resume, retention and dropped claim rows turned on, a starved pool, a long snapshot, a
// drifting link delay, an enqueue held across an ownership change); those that act on the
// instances take the host lane's turn. Each lane first runs every kind once in an order
// drawn from the seed, then kinds at random. Batches keep arriving throughout. Then the run
// quiesces: faults stop, every batch must finish and the claims must balance, and the
// history is checked: the batches, the attempt log and the state transitions (with what
// retention deleted, kept by the history audit), the claim events (ordered by commit
// timestamp), the simulator's record of every POST and settlement, and the key's promise
// from every job's changes and the operations' record.
package chaos
