// Command river measures River's no-op jobs on the same Postgres as `batchclaim bench`, for
// the side-by-side in docs/performance.md. It creates a scratch database, migrates River's
// schema into it, and runs the way River's own benchmark (cmd/river/riverbench in River's
// repository, its --num-total-jobs mode) does: the jobs table truncated and compacted, --jobs
// jobs of a worker that does nothing inserted with InsertMany, 5,000 a call, before one client
// starts; the clock from the client's start to the last job_completed event. Then it checks
// that river_job holds exactly --jobs rows, every one completed, prints one JSON line naming
// every setting and drops the database.
//
// Two tunings:
//
//   - riverbench (the default): what riverbench sets, FetchCooldown 2ms, FetchPollInterval
//     20ms, 2,000 workers on the default queue, and the pool riverbench's CLI opens: pgx's
//     default size (max(4, CPUs)), statement_timeout 10s, idle_in_transaction_session_timeout
//     11s.
//   - defaults: River's client defaults, FetchCooldown 100ms and FetchPollInterval 1s, with
//     1,000 workers (River has no default worker count), on the same pool.
//
// --workers, --fetch-cooldown, --fetch-poll-interval and --conns override a tuning's values;
// the line then says settings_overridden.
//
// It is its own module so that River is never a dependency of batchclaim:
//
//	cd bench/river && go run . --tuning riverbench --jobs 100000
package main
