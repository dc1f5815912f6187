// Command jobs is batchclaim's job runner as a River user would write it: typed jobs of three
// kinds, inserted in the application's own transaction, run in order per key (an order), with
// a middleware around every job, a retry, a timeout, a snooze, a job cancelled while it runs,
// a recorded output and a periodic job.
//
//	DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable go run ./examples/jobs
//
// It migrates the database (batchclaim's tables live in their own schema, batchclaim), creates
// a table of its own (shop_orders), runs one instance until its jobs are finished and prints
// what happened. docs/jobs.md explains each part and lists River's calls beside batchclaim's.
package main
