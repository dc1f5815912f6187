// Package batchclaim holds the vocabulary every other package of the project shares: batch
// states, ledger statuses, batch ids and the sentinel errors. It imports only the standard
// library so that every layer can depend on it without cycles.
//
// The working parts live in sub-packages: claims (the claim engine), queuer, submitter,
// observer, dlt (ledger adapters and a simulator) and node (wiring for embedders and the
// daemon). The design and the invariants they keep are described in docs/.
package batchclaim
