package dltsim

import "time"

// faults counts the injected failures still to come. Sim guards it.
type faults struct {
	statusCode int
	statusN    int
	timeoutN   int
	hold       time.Duration
	dropN      int
}

// InjectStatus makes the next n POSTs answer code (e.g. 500, 503, 408) without accepting
// their batches. It replaces an earlier status injection. A code outside 400..599 is ignored.
func (s *Sim) InjectStatus(code, n int) {
	if code < 400 || code > 599 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults.statusCode, s.faults.statusN = code, max(n, 0)
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
