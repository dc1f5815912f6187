package lock

import (
	"errors"
	"fmt"

	"github.com/batchclaim/batchclaim"
)

var (
	// ErrHeld reports that Acquire found the lock held by another owner whose TTL has not
	// passed by the database clock.
	ErrHeld = errors.New("lock held by another owner")

	// ErrNotHeld reports that a renewal, release or fence matched no lock with the caller's
	// name, token and epoch (the token is wrong or old: the lock expired and somebody else
	// acquired it), or that the lock had expired. Nothing was changed. It wraps
	// batchclaim.ErrClaimLost, so callers that stop work on a lost claim stop here too.
	ErrNotHeld = fmt.Errorf("lock not held: %w", batchclaim.ErrClaimLost)
)
