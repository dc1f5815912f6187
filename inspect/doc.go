// Package inspect reads what batchclaim's tables say about the work, for status displays:
// batches by state (Totals, Batches), typed jobs by kind (Kinds), one job (Job), the
// retention job's last run (Retention), and per instance the claims it holds and the batches
// it has in flight and committed (Instances), with the claims voided and how long each
// service_id waited to be taken over (Takeovers, TakeoverDelays). `batchclaim status` and
// `batchclaim demo` print these; their JSON names are the ones `batchclaim status --json`
// prints (docs/operations.md).
//
// The package only reads: every function runs SELECT statements and none writes, locks or
// waits for anything. Each takes a pgdb.Querier: a pgdb.DB (pgdb.Open), or a caller's
// connection or transaction moved into the schema with pgdb.DB.In. Claims and instances are
// read by claims.ReadSnapshot, halted service_ids by observer.Halts.
package inspect
