package batchclaim

import (
	"fmt"
	"strings"
)

// State is where a batch is in this system's own pipeline.
//
//	NEW -> INFLIGHT -> (PENDING | DELAYED | UNKNOWN) -> VALID -> COMMITTED
//	                 \-> INVALID (terminal)
//
// The state is stored in batches.state and every transition is one conditional statement.
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
)

// States lists every state in pipeline order.
var States = []State{StateNew, StateInflight, StatePending, StateDelayed, StateUnknown, StateValid, StateCommitted, StateInvalid}

// Terminal reports whether no further transition can happen.
func (s State) Terminal() bool { return s == StateCommitted || s == StateInvalid }

// ParseState reads a state name, case-insensitively.
func ParseState(s string) (State, error) {
	for _, st := range States {
		if strings.EqualFold(s, string(st)) {
			return st, nil
		}
	}
	return "", fmt.Errorf("unknown batch state %q", s)
}
