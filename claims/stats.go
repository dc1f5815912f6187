package claims

import "sync/atomic"

type counters struct {
	cycles, cycleErrors                        atomic.Int64
	serializationRetries, serializationGiveUps atomic.Int64
	gained, lost, voided, released, dropped    atomic.Int64
	deadlineFences, staleWrites                atomic.Int64
	writeRetries, renewErrors                  atomic.Int64
}

// Stats are the engine's cumulative counters since New, for metrics.
type Stats struct {
	Cycles               int64 // claim cycles started
	CycleErrors          int64 // cycles that failed
	SerializationRetries int64 // claim-cycle statements and Register run again after a transient conflict (40001, 40P01, 55P03)
	SerializationGiveUps int64 // cycles that failed after exhausting those retries
	Gained               int64 // claims gained (acquired or re-adopted)
	Lost                 int64 // claims lost, for any reason (taken, fenced, deadline, released)
	Voided               int64 // expired claims of other instances this instance freed (takeovers)
	Released             int64 // claims given back (surplus or shutdown)
	Dropped              int64 // idle claim rows deleted (Config.DropIdleAfter)
	DeadlineFences       int64 // times the local deadline passed without a renewal
	StaleWritesRejected  int64 // fenced writes refused because the epoch was stale
	WriteRetries         int64 // batch-recording transactions (WriteTx) run again after a lock timeout, deadlock or serialization failure
	RenewErrors          int64 // lease renewals that failed (the local deadline decides when that means fencing)
	Held                 int64 // claims held now
}

// Stats returns a snapshot of the counters.
func (e *Engine) Stats() Stats {
	e.mu.Lock()
	held := int64(len(e.held))
	e.mu.Unlock()
	return Stats{
		Cycles: e.stats.cycles.Load(), CycleErrors: e.stats.cycleErrors.Load(),
		SerializationRetries: e.stats.serializationRetries.Load(), SerializationGiveUps: e.stats.serializationGiveUps.Load(),
		Gained: e.stats.gained.Load(), Lost: e.stats.lost.Load(), Voided: e.stats.voided.Load(),
		Released: e.stats.released.Load(), Dropped: e.stats.dropped.Load(), DeadlineFences: e.stats.deadlineFences.Load(), StaleWritesRejected: e.stats.staleWrites.Load(),
		WriteRetries: e.stats.writeRetries.Load(), RenewErrors: e.stats.renewErrors.Load(), Held: held,
	}
}
