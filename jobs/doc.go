// Package jobs runs typed jobs on a batchclaim node, in the shape River gives them: arguments
// of a Go type that names its kind, one worker per kind, JSON in between.
//
// A kind is an option of the job runner, not a second one. A Workers is a
// submitter.Submitter like any other: the node hands it each job of a key in the key's order,
// one at a time, under the key's claim, and Workers decodes the job's arguments by its kind
// and calls the kind's worker. Everything else is the node's: states, retries and the attempt
// limit, run-at, cancel and retry, the status page (docs/jobs.md).
//
//	type SendEmail struct{ To, Subject string }
//
//	func (SendEmail) Kind() string { return "send_email" }
//
//	workers := jobs.NewWorkers()
//	jobs.AddWorker(workers, jobs.WorkFunc(func(ctx context.Context, j *jobs.Job[SendEmail]) error {
//		return mailer.Send(ctx, j.Args.To, j.Args.Subject)
//	}))
//	db, err := pgdb.Open(pool, "") // the default schema
//	n, err := node.New(db, node.Config{Submitter: workers})
//
//	// in the application's transaction:
//	_, err = jobs.Insert(ctx, tx, "customer-42", "", SendEmail{To: "a@example.com", Subject: "Hi"})
//
// # Kinds
//
// Insert stores the kind (Args.Kind) with the job, in the column batches.kind, and the
// arguments as JSON in its payload; InsertMany does so for many jobs of many keys and kinds in
// one statement. A job inserted without an id is never deduplicated. The status page and
// `batchclaim status` show the kind. A node runs any number of kinds; jobs stored without a
// kind (node.Enqueue) go to the Submitter given to Workers.AddPlain. A job whose kind no
// worker on the instance knows is DISCARDED at once, its last error naming the kind and the
// kinds registered (a job it is no use trying again until the worker is deployed: retry it
// then). So register a new kind on every instance before inserting its jobs.
//
// # Outcomes
//
// Work's nil error makes the job COMMITTED; Discard(err) DISCARDED at once;
// batchclaim.SnoozeFor(d) runs it again after d without spending an attempt; any other error
// is a failed attempt, retried after a backoff until the attempt limit. A panic in Work is a
// failed attempt too. A job cancelled while it runs (node.Cancel) has its context ended and
// becomes CANCELLED once Work returns. RecordOutput stores a small JSON output with the job.
// Periodic jobs of a kind are node.Config.Periodic entries whose Options hold
// ingest.Kind(kind) and whose Payload is the arguments' JSON (examples/jobs has one).
//
// # Timeouts
//
// A worker that implements Timeouter gives its kind's jobs a timeout; the Timeout option of
// Insert gives one job its own, which comes first. The job's context ends at it (its cause,
// context.Cause, is submitter.ErrTimeout) and the attempt is a failure whose last error says
// it timed out. The node's submit timeout (claims.Config.MaxSubmission) bounds every job
// whatever its timeout.
//
// # Hooks
//
// Middleware around every job (tracing, logging, metrics) is the node's, for typed jobs and
// plain ones alike: node.Config.Middleware, see submitter.Middleware and submitter.Hooks.
package jobs
