package httpguard

import "time"

// SetAfter replaces the timer that ends a Throttle's intervals, so that a test ends them.
func (t *Throttle) SetAfter(after func(time.Duration, func()) (stop func() bool)) { t.after = after }
