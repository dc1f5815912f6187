// Package history checks the pipeline's invariants from what was recorded: the batches table,
// the attempt log and the state transitions in the database, and the ledger's own record of
// every POST and commit (the simulator's). The demo and the fault tests both use it.
package history
