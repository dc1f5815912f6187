package dltsim

import "time"

// faults counts the injected failures still to come. Sim guards it.
type faults struct {
	statusCode int
	errorCode  int // sawtooth error code of the injected status; 0: the status's usual one
	statusN    int
	timeoutN   int
	hold       time.Duration
	dropN      int
	hiddenN    int
	hideMax    time.Duration
}

// InjectStatus makes the next n POSTs answer code (e.g. 500, 503, 408) without accepting
// their batches. It replaces an earlier status injection. A code outside 400..599 is ignored.
func (s *Sim) InjectStatus(code, n int) {
	if code < 400 || code > 599 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults.statusCode, s.faults.statusN, s.faults.errorCode = code, max(n, 0), 0
}

// InjectError is InjectStatus with the Sawtooth error code the body carries (e.g. 503 with
// code 18, "Validator Disconnected"); scabbard bodies have no such code and ignore it. Zero
// means the status's usual code. A 503 with code 17 ("Validator Timed Out": the batch may or
// may not have been processed) is the one error that takes effect: the batches are accepted
// and the answer is the error (Post.Effect "accepted-error").
func (s *Sim) InjectError(status, code, n int) {
	if status < 400 || status > 599 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults.statusCode, s.faults.statusN, s.faults.errorCode = status, max(n, 0), max(code, 0)
}

// ClearFaults cancels every injected failure still to come.
func (s *Sim) ClearFaults() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = faults{}
}

// InjectTimeouts makes the next n POSTs go unanswered without accepting their batches: the
// request is held for hold (or until the client goes away or the Sim closes) and the
// connection is then closed. It replaces an earlier timeout injection.
func (s *Sim) InjectTimeouts(n int, hold time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults.timeoutN, s.faults.hold = max(n, 0), max(hold, 0)
}

// InjectDroppedResponses makes the next n accepted POSTs take effect and then close the
// connection without an answer.
func (s *Sim) InjectDroppedResponses(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults.dropN = max(n, 0)
}

// InjectHiddenIntake makes the next n accepted POSTs take effect and lose their answer, and
// keeps each of their batches out of the status answers (UNKNOWN, as if not yet passed on to
// the validator) for a time drawn between 0 and hideMax (the batch id decides it), while the
// ledger works on it as usual: a client that asks about such a batch hears UNKNOWN a few times
// and then, at a moment it cannot foresee, the batch's real status. It replaces an earlier
// hidden-intake injection.
func (s *Sim) InjectHiddenIntake(n int, hideMax time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults.hiddenN, s.faults.hideMax = max(n, 0), max(hideMax, 0)
}
