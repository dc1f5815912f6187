package singleflight

import "sync/atomic"

// Stats counts what one Cache did since New.
type Stats struct {
	Gets          int64 // Get calls
	Hits          int64 // answered from a fresh entry without waiting
	StaleServed   int64 // answered at once with a stale value (AllowStale)
	Waits         int64 // times a Get waited for another fetch
	Fetches       int64 // source calls this cache made (leases it took)
	Takeovers     int64 // of those, leases taken over from a holder whose lease had expired
	FetchErrors   int64 // source calls that failed (stored as negative results)
	Rejected      int64 // results dropped because the lease had been taken over (old epoch)
	LeaseLost     int64 // fetches cancelled because renewing the lease failed
	NotifyWakeups int64 // waits ended by a notification
	PollWakeups   int64 // waits ended by the poll interval or the lease's expiry
	Reconnects    int64 // times the LISTEN connection was lost and opened again
}

type counters struct {
	gets, hits, staleServed, waits, fetches, takeovers, fetchErrors atomic.Int64
	rejected, leaseLost, notifyWakeups, pollWakeups, reconnects     atomic.Int64
}

func (c *counters) snapshot() Stats {
	return Stats{
		Gets: c.gets.Load(), Hits: c.hits.Load(), StaleServed: c.staleServed.Load(), Waits: c.waits.Load(),
		Fetches: c.fetches.Load(), Takeovers: c.takeovers.Load(), FetchErrors: c.fetchErrors.Load(),
		Rejected: c.rejected.Load(), LeaseLost: c.leaseLost.Load(), NotifyWakeups: c.notifyWakeups.Load(),
		PollWakeups: c.pollWakeups.Load(), Reconnects: c.reconnects.Load(),
	}
}
