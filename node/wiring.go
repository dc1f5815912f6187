package node

import (
	"sync/atomic"
	"time"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/claims"
	"github.com/batchclaim/batchclaim/observer"
	"github.com/batchclaim/batchclaim/queuer"
	"github.com/batchclaim/batchclaim/submitter"
)

// The wiring of New (doc.go, "Wiring"): the parts are built in dependency order, and the
// one edge that points back, from the hooks of the parts built first to the parts built on
// them, is backEdge. Hooks run only once Run starts, after New connected it.

// queue is the queuer as the hooks see it.
type queue interface {
	// Dirty makes the queuer look at the service_ids at its next fetch.
	Dirty(serviceIDs ...string)
	// Done, MayChain and Chained answer the submitter pool's hooks of the same names: a job is
	// over, may the next job of its service_id run on its worker, it did.
	Done(j batchclaim.Job)
	// Drained: the outcome of the job seq left its service_id without work, so Done need not
	// look at it again.
	Drained(serviceID string, seq int64)
	MayChain(j batchclaim.Job, run int) bool
	Chained(prev, next batchclaim.Job)
	// LastRound is when a fetch round last got an answer (progress).
	LastRound() time.Time
}

// watch is the status poller as the hooks see it.
type watch interface {
	// Note makes the poller ask the ledger about the service_id's accepted batches.
	Note(serviceID string)
	// Wake makes it ask now rather than at its next tick.
	Wake()
}

// overdue is the submitter pool as the progress check sees it.
type overdue interface {
	// Overdue is the number of calls running more than grace past their deadline.
	Overdue(now time.Time, grace time.Duration) int
}

var (
	_ queue   = (*queuer.Queuer)(nil)
	_ watch   = (*observer.Poller)(nil)
	_ overdue = (*submitter.Pool)(nil)
)

// backEdge is the one edge of the node's wiring that points back: from the claim engine, the
// recorder and the submitter pool, built first, to the parts built on them. Its methods are
// given to those as hooks; connect fills it at the end of New.
type backEdge struct {
	eng     *claims.Engine
	workers overdue
	queue   queue
	watch   watch // nil without a poller (Config.Statuses nil)
	// stopping is set when the node's stop begins: running jobs drain, the lease lasts
	// (progress).
	stopping atomic.Bool
}

// connect gives b the parts its hooks tell; poller may be nil.
func (b *backEdge) connect(eng *claims.Engine, workers *submitter.Pool, q *queuer.Queuer, poller *observer.Poller) {
	b.eng, b.workers, b.queue = eng, workers, q
	if poller != nil {
		b.watch = poller
	}
}

// gained is the engine's OnGained: the queuer looks at the service_id, and the poller asks
// the ledger about it, since a previous owner may have left batches for the ledger to tell
// about.
func (b *backEdge) gained(c claims.Claim) {
	b.queue.Dirty(c.ServiceID)
	if b.watch != nil {
		b.watch.Note(c.ServiceID)
	}
}

// awaiting is the queuer's Awaiting: a fetch read a head that waits for the ledger's answer,
// and the poller asks about it (it may not know of it: the write that put it there committed
// with its answer lost).
func (b *backEdge) awaiting(serviceID string) {
	if b.watch != nil {
		b.watch.Note(serviceID)
	}
}

// recorded is the recorder's Recorded: an outcome of the service_id is stored, its next batch
// may go.
func (b *backEdge) recorded(serviceID string) { b.queue.Dirty(serviceID) }

// drained is the recorder's Drained: an outcome left the service_id without work.
func (b *backEdge) drained(serviceID string, seq int64) { b.queue.Drained(serviceID, seq) }

// statusChanged is the poller's part of the recorder's StatusChanged: a batch the ledger
// accepted (PENDING, asked about now), or one whose outcome it still has to tell (VALID,
// UNKNOWN).
func (b *backEdge) statusChanged(t observer.Transition) {
	if b.watch == nil {
		return
	}
	switch t.To {
	case batchclaim.StatePending:
		b.watch.Note(t.ServiceID)
		b.watch.Wake() // ask the ledger about it now, not at the next poll tick
	case batchclaim.StateValid, batchclaim.StateUnknown:
		b.watch.Note(t.ServiceID)
	}
}

// done, mayChain and chained are the submitter pool's hooks, answered by the queuer.
func (b *backEdge) done(j batchclaim.Job)                   { b.queue.Done(j) }
func (b *backEdge) mayChain(j batchclaim.Job, run int) bool { return b.queue.MayChain(j, run) }
func (b *backEdge) chained(prev, next batchclaim.Job)       { b.queue.Chained(prev, next) }
