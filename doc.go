// Package batchclaim holds the vocabulary every other package of the project shares: a
// Claim and the Job that runs under it, batch states, ledger statuses, batch ids and the
// sentinel errors. The queuer hands a Job to the submitter, which posts it and has the
// recorder write about it: one type from end to end, no conversions at the boundaries. It imports only the standard
// library so that every layer can depend on it without cycles.
//
// The working parts live in sub-packages: claims (the claim engine), queuer, submitter,
// observer, dlt (ledger adapters and a simulator) and node (wiring for embedders and the
// daemon). The design and the invariants they keep are described in docs/.
package batchclaim
