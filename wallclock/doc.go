// Package wallclock is the daemon's reading of the wall clock, with a test hook that skews
// it: the environment variable BATCHCLAIM_TEST_WALL_CLOCK_OFFSET (a Go duration, e.g. "-7m")
// moves every wall-clock value the daemon reads through Now or Wall by that much, as on a
// host whose clock is off. Go reads the clock through the vDSO, so a library such as
// libfaketime cannot do this from outside.
//
// Nothing about claims depends on the wall clock: expiry is stored and judged by the
// database's now(), and an instance's local deadline is measured with Go's monotonic clock
// (time.Now, Before, Since, Until between two readings of this process), which a skewed wall
// clock does not move. The hook therefore leaves time.Now alone and is used only where a wall
// value is read: the timestamps of the daemon's logs, and the HTTP date a ledger may send in
// Retry-After. The chaos suite runs instances with the offset set (fault clock_skew) to show
// that this changes nothing; docs/chaos.md lists the library's readings of the clock and why
// each is monotonic.
//
// A second hook, BATCHCLAIM_TEST_CLOCK_RATE (rate.go), is about the monotonic clock's rate: a
// schedule of rates at which the lease's local deadline counts (internal/lease measures its
// window with Span), as on a host whose clock runs slow or fast. The chaos suite's clock_rate
// operation runs instances with it. Without it every rate is 1 and Span returns its duration.
package wallclock
