package batchclaim

import "errors"

var (
	// ErrClaimLost reports that a write fenced by (service_id, claimant, epoch) affected no
	// row: the caller no longer owns the service_id and must stop working on it at once.
	ErrClaimLost = errors.New("claim lost")

	// ErrNotFound reports that a looked-up row does not exist.
	ErrNotFound = errors.New("not found")

	// ErrStateChanged reports that a batch was not in the state a conditional write expected
	// any more: another writer won, and the caller skips the batch.
	ErrStateChanged = errors.New("batch state changed")
)
