package batchclaim

import (
	"errors"
	"fmt"
	"time"
)

// SnoozeError is the error a job returns to run again after Delay without spending an
// attempt: the submitter records it as the verdict Snooze with Delay as its RetryAfter. It is
// found anywhere in the error's chain (errors.As), so a job may wrap it.
type SnoozeError struct {
	Delay time.Duration // until the job runs again, by the database clock; negative is 0
}

func (e *SnoozeError) Error() string { return fmt.Sprintf("snoozed for %s", e.Delay) }

// SnoozeFor returns the error that snoozes a job for d: it becomes DELAYED, due d after its
// outcome is recorded (by the database clock), and its next attempt is not counted against
// its attempt limit or its backoff, since this one was not a failure. Its service_id waits
// for it: the order per key holds. The same as returning Result{Verdict: Snooze, RetryAfter: d}.
func SnoozeFor(d time.Duration) error { return &SnoozeError{Delay: max(d, 0)} }

// SnoozeDelay reports whether err asks to snooze the job (a SnoozeError in its chain), and
// for how long.
func SnoozeDelay(err error) (time.Duration, bool) {
	if err == nil { // the common case, without the allocation errors.As's target costs
		return 0, false
	}
	var s *SnoozeError
	if errors.As(err, &s) {
		return max(s.Delay, 0), true
	}
	return 0, false
}
