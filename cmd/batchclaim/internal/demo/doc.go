// Package demo is `batchclaim demo` (what `make demo` runs): a throwaway Postgres, the ledger
// simulator and several `batchclaim run` processes sharing service_ids, with faults on the way
// (ledger errors and lost answers, one instance killed, one stopped past its expiry, the ledger
// restarted). It then reads the ledger's record and the database's history and prints what
// happened: batches committed and lost, per-service_id order at the ledger, duplicate POSTs and
// whether an unknown outcome explains each, stale writes rejected, and the slowest takeover.
// It exits non-zero when a batch was lost, sent out of order, or posted again without an
// unknown outcome to explain it.
package demo
