// Package periodic stores periodic jobs: at every tick of a schedule (a cron expression, or
// a fixed interval), one job under a key, once across all instances, also across restarts
// and the death of an instance in the middle of a tick.
//
// # A tick is a job id
//
// A tick's job has the id TickID(name, tick), "periodic/<name>/<tick in RFC 3339, UTC>",
// under the job's key (Job.ServiceID, "periodic/<name>" unless set). Every instance computes
// the same ticks from the same schedule: Cron expressions are read in UTC (or the zone their
// CRON_TZ= names), not in each instance's local zone, and Every(d) ticks at the multiples of
// d since the Unix epoch, not d after each instance started. The tick's job then runs like
// any other job of its key: in order, one at a time, retried, discarded, cancelled.
//
// # Who stores a tick: every instance, and the database picks one
//
// Each schedule has a row in periodic_jobs with the last tick stored. Every instance given
// the job looks when a tick comes (by the database's clock: a tick has come when the
// database's now() has reached it) and stores it in one transaction that first advances the
// row's last tick, conditionally (only from an earlier tick), then enqueues the tick's job.
// Two instances at the same tick meet on the row's lock: the second one's update waits for
// the first transaction and then finds the tick taken, and stores nothing. If the first
// instance dies in the middle (its process killed, its connection cut), its transaction
// rolls back, the row lock goes with it, and the tick is free for the next instance that
// looks: nothing of a tick is ever half stored. And if a tick were stored twice anyway, it
// would be the same job id under the same key, which the enqueue's deduplication stores
// once.
//
// There is no leader: a leader (patterns/election) would only move the question to the
// leader's own death in the middle of a tick, and add the time before a successor is elected
// to every tick lost with it. Every instance trying costs one short transaction per instance
// per tick that stores nothing, and the database's row lock already is the election for one
// tick.
//
// # Missed ticks: only the latest is stored
//
// While no instance runs (all down, the database unreachable), ticks pass unstored. The
// first look after that stores the latest tick that has come, once, and not the ones before
// it: a job that was due every minute during an hour's outage runs once when the instances
// are back, not sixty times. Its log line says how many ticks were passed over. A new job
// (its row created by the first instance given it) has no tick stored: its first tick is
// its schedule's first after it was registered; nothing runs at once.
//
// The last tick stored lives in the row, not only in the job: a finished job deleted by
// retention cannot make its tick look unstored.
//
// # On a node
//
// node.Config.Periodic runs a Scheduler beside the node's work; List feeds the status page's
// periodic jobs, with each job's next run; Delete removes the row of a job no instance runs
// any more.
package periodic
