package claims

import (
	"slices"
	"sync/atomic"
	"time"
)

type counters struct {
	cycleTime                                  durations
	cycles, cycleErrors                        atomic.Int64
	serializationRetries, serializationGiveUps atomic.Int64
	gained, lost, voided, released, dropped    atomic.Int64
	deadlineFences, staleWrites                atomic.Int64
	writeRetries, renewErrors, stalls          atomic.Int64
	surveyAt, surveyHeld                       atomic.Int64 // the last survey that answered (unix nanoseconds); claims the database may list as ours (LastSurvey)
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
	Stalls               int64 // times renewal stopped because Config.Progress said the instance's work does not move
	Held                 int64 // claims held now
	Yielding             int64 // of those, claims being given back as their running jobs end (Engine.Yielding)
	// CycleSeconds is how long the claim cycles took (Cycle from start to end, failed
	// ones included), as a histogram with bounds from 1 ms to 10 s.
	CycleSeconds Histogram
}

// cycleBounds are the upper bounds, in seconds, of Stats.CycleSeconds' buckets.
var cycleBounds = [...]float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// Histogram is a cumulative histogram: Counts[i] observations took at most Bounds[i]
// seconds; Count is all of them (the +Inf bucket) and Sum their total in seconds.
type Histogram struct {
	Bounds []float64
	Counts []uint64
	Count  uint64
	Sum    float64
}

// durations counts observations into cycleBounds' buckets without a lock.
type durations struct {
	buckets [len(cycleBounds) + 1]atomic.Uint64 // one per bound and +Inf, not cumulative
	nanos   atomic.Int64
}

func (d *durations) observe(t time.Duration) {
	s := t.Seconds()
	i := 0
	for i < len(cycleBounds) && s > cycleBounds[i] {
		i++
	}
	d.buckets[i].Add(1)
	d.nanos.Add(int64(t))
}

func (d *durations) snapshot() Histogram {
	h := Histogram{Bounds: slices.Clone(cycleBounds[:]), Counts: make([]uint64, len(cycleBounds))}
	for i := range d.buckets {
		h.Count += d.buckets[i].Load()
		if i < len(cycleBounds) {
			h.Counts[i] = h.Count
		}
	}
	h.Sum = time.Duration(d.nanos.Load()).Seconds()
	return h
}

// LastSurvey is when the survey of a claim cycle last answered (zero before the first) and how
// many claims the database may list as this instance's: the count that survey read, or the
// claims a fence at the local deadline dropped from memory since, whichever is more. Those
// are claims the instance still holds in the database though it holds none in memory, until
// a survey reads them again.
func (e *Engine) LastSurvey() (at time.Time, held int64) {
	if n := e.stats.surveyAt.Load(); n != 0 {
		at = time.Unix(0, n)
	}
	return at, e.stats.surveyHeld.Load()
}

// Stats returns a snapshot of the counters.
func (e *Engine) Stats() Stats {
	e.mu.Lock()
	held, yielding := int64(len(e.held)), int64(0)
	if e.yields.Load() > 0 {
		for _, h := range e.held {
			if h.yielding {
				yielding++
			}
		}
	}
	e.mu.Unlock()
	return Stats{
		Cycles: e.stats.cycles.Load(), CycleErrors: e.stats.cycleErrors.Load(),
		SerializationRetries: e.stats.serializationRetries.Load(), SerializationGiveUps: e.stats.serializationGiveUps.Load(),
		Gained: e.stats.gained.Load(), Lost: e.stats.lost.Load(), Voided: e.stats.voided.Load(),
		Released: e.stats.released.Load(), Dropped: e.stats.dropped.Load(), DeadlineFences: e.stats.deadlineFences.Load(), StaleWritesRejected: e.stats.staleWrites.Load(),
		WriteRetries: e.stats.writeRetries.Load(), RenewErrors: e.stats.renewErrors.Load(), Stalls: e.stats.stalls.Load(), Held: held, Yielding: yielding,
		CycleSeconds: e.stats.cycleTime.snapshot(),
	}
}
