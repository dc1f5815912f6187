package batchclaim

import "encoding/json"

// Status is what a ledger says about a batch id.
type Status string

const (
	StatusPending   Status = "PENDING"
	StatusInvalid   Status = "INVALID"
	StatusValid     Status = "VALID"
	StatusCommitted Status = "COMMITTED"
	StatusUnknown   Status = "UNKNOWN"
)

// State is the batch state a ledger status leads to: COMMITTED, INVALID, VALID and PENDING
// their namesakes, anything else UNKNOWN.
func (s Status) State() State {
	switch s {
	case StatusCommitted:
		return StateCommitted
	case StatusInvalid:
		return StateInvalid
	case StatusValid:
		return StateValid
	case StatusPending:
		return StatePending
	}
	return StateUnknown
}

// State is the batch state a verdict leads to.
func (v Verdict) State() State {
	switch v {
	case Done:
		return StateCommitted
	case Accepted:
		return StatePending
	case Rejected:
		return StateInvalid
	case Retry, Snooze:
		return StateDelayed
	case Discard:
		return StateDiscarded
	}
	return StateUnknown
}

// Status is what the ledger is taken to say when a submission's verdict is v: PENDING for
// Accepted, INVALID for Rejected, COMMITTED for Done; empty when the verdict says nothing
// about the ledger (Retry, Unknown, Discard, Snooze).
func (v Verdict) Status() Status {
	switch v {
	case Accepted:
		return StatusPending
	case Rejected:
		return StatusInvalid
	case Done:
		return StatusCommitted
	}
	return ""
}

// Status is the ledger status this system reports for a batch in state s when it answers as
// a ledger itself (the ingest API's batch statuses): COMMITTED and INVALID their namesakes,
// DISCARDED and CANCELLED UNKNOWN (this system gave up on it; the ledger has no record of it
// that anyone saw), any other state PENDING, since the batch is stored and on its way.
func (s State) Status() Status {
	switch s {
	case StateCommitted:
		return StatusCommitted
	case StateInvalid:
		return StatusInvalid
	case StateDiscarded, StateCancelled:
		return StatusUnknown // given up before the ledger took it (as far as anyone knows)
	}
	return StatusPending
}

// InvalidTransaction explains why a batch is INVALID.
type InvalidTransaction struct {
	ID           string
	Message      string
	ExtendedData []byte
}

// LedgerStatus is what a ledger says about one batch id.
type LedgerStatus struct {
	ID     string
	Status Status
	// Invalid lists the failed transactions of an INVALID batch.
	Invalid []InvalidTransaction
}

// State is the batch state the status leads to (see Status.State).
func (s LedgerStatus) State() State { return s.Status.State() }

// InvalidDetails is Invalid as the JSON stored with the batch (batches.invalid_details):
// nil when the ledger named no failed transaction.
func (s LedgerStatus) InvalidDetails() ([]byte, error) {
	if len(s.Invalid) == 0 {
		return nil, nil
	}
	return json.Marshal(s.Invalid)
}

// Reason is why a job is handed out (stored with its attempt), or, for a batch left in
// flight, why it is adopted (stored as the detail of its UNKNOWN).
type Reason string

const (
	ReasonFirst    Reason = "first"    // a NEW batch, posted for the first time
	ReasonRetry    Reason = "retry"    // a DELAYED batch whose back-off has passed
	ReasonResubmit Reason = "resubmit" // an UNKNOWN batch the ledger does not know, posted again

	// ReasonLostTrack adopts a batch this instance left in flight under its current claim.
	ReasonLostTrack Reason = "in flight when this instance lost track of it"
	// ReasonOwnerChanged adopts a batch left in flight under an earlier claim.
	ReasonOwnerChanged Reason = "in flight when its owner changed"
)
