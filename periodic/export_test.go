package periodic

import "time"

// SetMidTick makes s call f inside each tick's transaction, after it took the tick and stored
// its job and before the commit; f may block to hold the tick (a test's instance dying there).
func SetMidTick(s *Scheduler, f func(name string, tick time.Time)) { s.midTick = f }

// LatestTick is latestTick, for the table test.
var LatestTick = latestTick
