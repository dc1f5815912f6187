package ui

import "time"

// SetWriteTimeout shortens h's bound on one write, so that a test of a write that runs out of
// time need not wait the full writeTimeout.
func SetWriteTimeout(h *Handler, d time.Duration) { h.writeTimeout = d }
