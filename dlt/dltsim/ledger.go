package dltsim

import (
	"slices"
	"time"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/dlt"
)

// entry is what the ledger holds about one batch.
type entry struct {
	id      string
	service string
	txIDs   []string
	status  batchclaim.Status
	invalid bool // decided on arrival: settles INVALID instead of COMMITTED
	arrived time.Time
	updated time.Time
	hidden  time.Time // until then the API reports the batch as unknown (InjectHiddenIntake)
}

// view is a copy of an entry as the API reports it.
type view struct {
	id      string
	status  batchclaim.Status
	txIDs   []string
	updated time.Time
}

// ledger is the state of the simulated ledger. It is not safe for concurrent use; Sim
// guards it. Time only moves when a method is given a later now.
type ledger struct {
	scabbard      bool
	latency       time.Duration
	paused        bool
	historyLimit  int           // scabbard; negative: unlimited
	invalidMemory time.Duration // sawtooth
	high, low     int
	throttled     bool

	entries map[string]*entry // statuses the API can report
	history []string          // scabbard: ids of entries, oldest first
	queue   []*entry          // PENDING (scabbard: and VALID) in arrival order
	queued  map[string]*entry
	chain   []string // committed ids in commit order
	onChain map[string]bool
	settled []Settlement // every settlement, in order
	posts   int          // POST records so far (Sim keeps it current), for Settlement.AfterPosts
}

func newLedger(cfg Config) *ledger {
	return &ledger{
		scabbard:      cfg.Flavor == dlt.FlavorScabbard,
		latency:       cfg.CommitLatency,
		historyLimit:  cfg.HistoryLimit,
		invalidMemory: cfg.InvalidMemory,
		high:          cfg.QueueHigh,
		low:           cfg.QueueLow,
		entries:       make(map[string]*entry),
		queued:        make(map[string]*entry),
		onChain:       make(map[string]bool),
	}
}

// advance settles, in order, every queued batch whose latency has passed and, on scabbard,
// executes the ones halfway there.
func (l *ledger) advance(now time.Time) {
	if l.paused {
		return
	}
	n := 0
	for n < len(l.queue) && !now.Before(l.queue[n].arrived.Add(l.latency)) {
		l.settle(l.queue[n], now)
		n++
	}
	l.dequeue(n)
	if l.scabbard {
		l.execute(now)
	}
}

// execute marks, in order, the queued scabbard batches halfway through their latency as VALID,
// or settles them INVALID.
func (l *ledger) execute(now time.Time) {
	kept := l.queue[:0]
	for i, e := range l.queue {
		if now.Before(e.arrived.Add(l.latency / 2)) {
			kept = append(kept, l.queue[i:]...)
			break
		}
		switch {
		case e.invalid:
			l.settle(e, now)
			delete(l.queued, e.id)
			continue
		case e.status == batchclaim.StatusPending:
			e.status, e.updated = batchclaim.StatusValid, now
		}
		kept = append(kept, e)
	}
	clear(l.queue[len(kept):])
	l.queue = kept
}

// settle ends a batch's time in the queue: COMMITTED, or INVALID.
func (l *ledger) settle(e *entry, now time.Time) {
	e.updated = now
	if e.invalid {
		e.status = batchclaim.StatusInvalid
		l.settled = append(l.settled, Settlement{BatchID: e.id, Service: e.service, Status: string(e.status), At: now, AfterPosts: l.posts})
		return
	}
	if !l.onChain[e.id] {
		l.settled = append(l.settled, Settlement{BatchID: e.id, Service: e.service, Status: string(batchclaim.StatusCommitted), At: now, AfterPosts: l.posts})
	}
	e.status = batchclaim.StatusCommitted
	if !l.onChain[e.id] {
		l.onChain[e.id] = true
		l.chain = append(l.chain, e.id)
	}
}

// dequeue drops the first n queued batches.
func (l *ledger) dequeue(n int) {
	for _, e := range l.queue[:n] {
		delete(l.queued, e.id)
	}
	l.queue = slices.Delete(l.queue, 0, n)
}

// commitNext settles up to n queued batches at once, regardless of latency and pause.
func (l *ledger) commitNext(n int, now time.Time) int {
	n = min(max(n, 0), len(l.queue))
	for _, e := range l.queue[:n] {
		l.settle(e, now)
	}
	l.dequeue(n)
	return n
}

// admit applies the queue's hysteresis and reports whether a POST may be accepted.
func (l *ledger) admit() bool {
	if l.throttled && len(l.queue) < l.low {
		l.throttled = false
	}
	if !l.throttled && len(l.queue) >= l.high {
		l.throttled = true
	}
	return !l.throttled
}

// known returns the entry a re-post of id would duplicate, or nil for a new batch. On
// scabbard a batch that is queued or on the chain but out of the history is remembered again.
func (l *ledger) known(id string, now time.Time) *entry {
	if e := l.lookup(id, now); e != nil {
		return e
	}
	e := l.queued[id]
	if e == nil && l.onChain[id] {
		e = &entry{id: id, status: batchclaim.StatusCommitted, updated: now}
	}
	if e != nil {
		l.remember(e)
	}
	return e
}

// accept records a batch and reports whether it was a duplicate.
func (l *ledger) accept(b dlt.Batch, service string, invalid bool, now time.Time) (duplicate bool) {
	if l.known(b.ID, now) != nil {
		return true
	}
	e := &entry{
		id: b.ID, service: service, txIDs: b.TransactionIDs, status: batchclaim.StatusPending,
		invalid: invalid, arrived: now, updated: now,
	}
	l.queue = append(l.queue, e)
	l.queued[e.id] = e
	l.remember(e)
	return false
}

// remember makes an entry reportable; on scabbard it may evict the oldest one.
func (l *ledger) remember(e *entry) {
	if _, ok := l.entries[e.id]; ok {
		return
	}
	l.entries[e.id] = e
	if !l.scabbard {
		return
	}
	l.history = append(l.history, e.id)
	for l.historyLimit >= 0 && len(l.history) > l.historyLimit {
		delete(l.entries, l.history[0])
		l.history = slices.Delete(l.history, 0, 1)
	}
}

// lookup returns the reportable entry of id, forgetting an expired sawtooth INVALID.
func (l *ledger) lookup(id string, now time.Time) *entry {
	e := l.entries[id]
	if e != nil && !l.scabbard && e.status == batchclaim.StatusInvalid &&
		now.Sub(e.updated) >= l.invalidMemory {
		delete(l.entries, id)
		return nil
	}
	return e
}

// hide keeps a just accepted batch out of the status answers until until.
func (l *ledger) hide(id string, until time.Time) {
	if e := l.entries[id]; e != nil {
		e.hidden = until
	}
}

// view reports a batch as the API would.
func (l *ledger) view(id string, now time.Time) view {
	e := l.lookup(id, now)
	if e == nil || now.Before(e.hidden) {
		return view{id: id, status: batchclaim.StatusUnknown, updated: now}
	}
	return view{id: id, status: e.status, txIDs: e.txIDs, updated: e.updated}
}

// restart forgets everything held in memory: the queue, INVALID statuses and, on scabbard,
// the whole history. The chain survives.
func (l *ledger) restart() {
	clear(l.queued)
	l.queue = nil
	l.throttled = false
	l.history = nil
	for id, e := range l.entries {
		if l.scabbard || e.status != batchclaim.StatusCommitted {
			delete(l.entries, id)
		}
	}
}
