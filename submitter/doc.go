// Package submitter posts batches with a bounded pool of workers.
//
// A submission is three steps: the in-flight mark, fenced on the claim's epoch and committed
// before anything leaves the process (the queuer marks a round's NEW heads in the statement
// that reads them, observer.Recorder.Take, and its retries in one more, Recorder.Mark; a worker that goes on with its service_id's next batch gets it
// marked by the write of the previous outcome); the call itself (Submitter.Submit), run under
// the claim's context so that losing the claim or passing the local deadline cancels it, and
// bounded by the submit timeout; and the recording of its outcome, fenced again
// (Recorder.Finish), so that a late answer after a takeover is refused. A worker (one of
// Config.Workers) is held for the call alone: the outcome's write, which waits for the
// recorder's next statement, holds none, and a job that write chains waits for a free worker
// like any other.
//
// Submitter is the small interface a user implements to run any per-key serial job; the DLT
// adapters are one implementation (wired in package node). Results say what to do next:
// Done (terminal success), Accepted (the ledger will tell the outcome later), Rejected
// (terminal, never resubmitted), Retry (back-pressure: try again after a backoff), Unknown
// (the call may or may not have taken effect) and Discard (give up on the job). An error is
// Unknown, or Retry with Config.RetryErrors (a job runner); with Config.MaxAttempts the last
// allowed attempt of a job that keeps failing is Discard. docs/jobs.md has the whole table.
package submitter
