package observer

import (
	"github.com/google/uuid"

	"github.com/batchclaim/batchclaim/claims"
)

// Events are hooks for embedders. Every field is optional. Hooks run synchronously on the
// goroutine that made the change, after it is committed: keep them short.
type Events struct {
	// StatusChanged: a batch changed state (recorded and committed).
	StatusChanged func(Transition)
	// ClaimGained and ClaimLost: this instance gained or lost a service_id.
	ClaimGained func(claims.Claim)
	ClaimLost   func(claims.Claim, claims.LossReason)
	// InstancePresumedDead: this instance freed a claim of another whose lease expired.
	InstancePresumedDead func(instanceID uuid.UUID, serviceID string, phase string)
}

func (e *Events) statusChanged(t Transition) {
	if e != nil && e.StatusChanged != nil {
		e.StatusChanged(t)
	}
}
