// Command river measures River's no-op jobs on the same Postgres as `batchclaim bench`, for
// the side-by-side in docs/performance.md. It creates a scratch database, migrates River's
// schema into it, stores --jobs jobs of a worker that does nothing, runs one client with
// --workers workers until every job is completed, prints one JSON line and drops the
// database.
//
// It is its own module so that River is never a dependency of batchclaim:
//
//	cd bench/river && go run . --workers 100 --jobs 10000
package main
