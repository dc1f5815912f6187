package batchclaim

import (
	"fmt"
	"strings"
)

// State is where a batch is in this system's own pipeline.
//
//	NEW -> INFLIGHT -> (PENDING | DELAYED | UNKNOWN) -> VALID -> COMMITTED
//	                 \-> INVALID (terminal)
//	                 \-> DISCARDED (terminal: out of attempts, or given up by its Submitter)
//	NEW, DELAYED -> CANCELLED (terminal: cancelled before it ran)
//	INFLIGHT -> CANCELLED (cancelled while it ran: the outcome of its attempt, unless Done)
//
// A retry (node.Retry) takes a DISCARDED, CANCELLED or INVALID batch back to NEW. The state is
// stored in batches.state and every transition is one conditional statement.
type State string

const (
	StateNew       State = "NEW"       // stored, never posted
	StateInflight  State = "INFLIGHT"  // marked (fenced) for a POST that may be running
	StatePending   State = "PENDING"   // accepted by the ledger, outcome not yet known
	StateDelayed   State = "DELAYED"   // ledger back-pressure; retried after next_attempt_at
	StateUnknown   State = "UNKNOWN"   // the ledger does not know the batch (yet, or any more)
	StateValid     State = "VALID"     // executed but not yet committed (scabbard)
	StateCommitted State = "COMMITTED" // terminal: on the ledger
	StateInvalid   State = "INVALID"   // terminal: rejected, never resubmitted
	StateDiscarded State = "DISCARDED" // terminal: out of attempts, or given up; retryable
	StateCancelled State = "CANCELLED" // terminal: cancelled before it ran, or while it ran; retryable
)

// States lists every state in pipeline order.
var States = []State{StateNew, StateInflight, StatePending, StateDelayed, StateUnknown, StateValid,
	StateCommitted, StateInvalid, StateDiscarded, StateCancelled}

// Terminal reports whether the batch is finished: no further transition happens unless an
// operator retries it. A terminal batch no longer holds back its service_id's next one.
func (s State) Terminal() bool {
	switch s {
	case StateCommitted, StateInvalid, StateDiscarded, StateCancelled:
		return true
	}
	return false
}

// ParseState reads a state name, case-insensitively.
func ParseState(s string) (State, error) {
	for _, st := range States {
		if strings.EqualFold(s, string(st)) {
			return st, nil
		}
	}
	return "", fmt.Errorf("unknown batch state %q", s)
}
