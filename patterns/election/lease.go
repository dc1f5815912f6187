package election

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/batchclaim/batchclaim/internal/db"
)

// The lease's local side is internal/lease's Deadline, with window T - I: a lease write
// (join or renewal) sent at sent and confirmed by the database makes the lease usable until
// sent + T - I. The database stamped the write no earlier than sent, so the lease it sees
// lasts at least until sent + T: the local deadline ends at least I before anyone else can
// be elected, even if the write sat in a network queue. When the deadline passes without a
// confirmed renewal, the watchdog steps every term down (deadlinePassed); a renewal that
// comes back after that changes nothing, and only a new join makes the lease live again.
// The renewal itself is not internal/lease's loop: it shares a cycle and a connection with
// the campaign for roles, and its answer carries the terms to reconcile.

// leaseUsable reports whether the lease is believed live and its deadline has not passed.
func (e *Elector) leaseUsable() bool { return e.lease.Live() }

// renewed applies a confirmed renewal sent at sent; dbHeld is what the database says this
// instance holds (role -> epoch). Terms the database no longer lists are stepped down; terms
// it lists that this instance does not hold (an election whose answer was lost) are adopted.
// A renewal that comes back after its deadline changes nothing: the next cycle joins again,
// which resigns the old terms, so a term never survives a step-down.
func (e *Elector) renewed(sent time.Time, dbHeld map[string]int64) {
	if !e.lease.Confirm(sent) {
		return
	}
	e.mu.Lock()
	var lost []Term
	for role, h := range e.held {
		if ep, ok := dbHeld[role]; !ok || ep != h.term.Epoch {
			lost = append(lost, h.term)
		}
	}
	var adopt []Term
	for _, role := range e.cfg.Roles {
		ep, ok := dbHeld[role]
		if _, held := e.held[role]; ok && !held {
			adopt = append(adopt, Term{Role: role, Epoch: ep, InstanceID: e.id, Name: e.cfg.Name, Host: e.cfg.Host})
		}
	}
	e.mu.Unlock()
	for _, t := range lost {
		e.stepDown(t, StepDownLost)
	}
	for _, t := range adopt {
		e.elected(t)
	}
}

// leaseLost handles a renewal the database refused: the lease expired or was evicted.
func (e *Elector) leaseLost() {
	e.lease.Lose()
	e.stepDownAll(StepDownLost)
	e.log.Warn("lease lost: the database refused the renewal; joining again")
}

// deadlinePassed runs once when the local deadline passed without a confirmed renewal: every
// term's context is cancelled, the instance steps down on its own.
func (e *Elector) deadlinePassed() {
	e.mu.Lock()
	n := len(e.held)
	e.mu.Unlock()
	if n > 0 {
		e.log.Error("no renewal confirmed within T - I of its sending; stepping down", "terms", n)
	}
	e.stepDownAll(StepDownDeadline)
}

// elected starts a term: it is recorded and OnElected runs in its own goroutine. A term
// confirmed after the lease's deadline is not started (the next join resigns it).
func (e *Elector) elected(t Term) {
	e.mu.Lock()
	if !e.usableLocked() || e.runCtx == nil {
		e.mu.Unlock()
		// A passed deadline ends the lease and its terms now; a lease still live but with no
		// context to start the term in is dropped, so that the next cycle joins again.
		if e.lease.Check() {
			e.lease.Lose()
		}
		return
	}
	if h, ok := e.held[t.Role]; ok && h.term.Epoch == t.Epoch {
		e.mu.Unlock()
		return
	}
	ctx, cancel := context.WithCancel(e.runCtx)
	h := &heldTerm{term: t, cancel: cancel, done: make(chan struct{})}
	e.held[t.Role] = h
	e.mu.Unlock()
	e.stats.elected.Add(1)
	e.log.Info("elected primary", "role", t.Role, "epoch", t.Epoch)
	if e.cfg.OnElected == nil {
		close(h.done)
		return
	}
	go func() {
		defer close(h.done)
		e.cfg.OnElected(ctx, t)
	}()
}

// stepDown ends t if it is still held with its epoch.
func (e *Elector) stepDown(t Term, why StepDownReason) {
	e.mu.Lock()
	h, ok := e.held[t.Role]
	if !ok || h.term.Epoch != t.Epoch {
		e.mu.Unlock()
		return
	}
	delete(e.held, t.Role)
	h.cancel()
	e.mu.Unlock()
	e.notifyStepDown(t, why)
}

func (e *Elector) stepDownAll(why StepDownReason) {
	e.mu.Lock()
	var gone []Term
	for role, h := range e.held {
		h.cancel()
		gone = append(gone, h.term)
		delete(e.held, role)
	}
	e.mu.Unlock()
	for _, t := range gone {
		e.notifyStepDown(t, why)
	}
}

func (e *Elector) notifyStepDown(t Term, why StepDownReason) {
	e.stats.steppedDown.Add(1)
	e.log.Info("stepped down", "role", t.Role, "epoch", t.Epoch, "reason", string(why))
	if e.cfg.OnSteppedDown != nil {
		e.cfg.OnSteppedDown(t, why)
	}
}

// shutdown runs when Run's context ended: every term's context is already cancelled; wait
// (bounded) for the OnElected callbacks, then resign the terms whose callbacks returned and
// leave, so that others are elected at once.
func (e *Elector) shutdown(ctx context.Context) {
	e.lease.Stop()
	e.mu.Lock()
	var hs []*heldTerm
	for role, h := range e.held {
		h.cancel()
		hs = append(hs, h)
		delete(e.held, role)
	}
	e.mu.Unlock()
	for _, h := range hs {
		e.notifyStepDown(h.term, StepDownStopped)
	}
	wait := time.NewTimer(shutdownWait)
	defer wait.Stop()
	p := db.ElectionTermsResignParams{InstanceID: e.id}
	for _, h := range hs {
		select {
		case <-h.done:
			p.Roles = append(p.Roles, h.term.Role)
			p.Epochs = append(p.Epochs, h.term.Epoch)
		case <-wait.C:
			e.log.Warn("OnElected still running after its context was cancelled; its term is left to expire", "role", h.term.Role)
		}
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	defer e.dropConnection(ctx)
	if len(p.Roles) > 0 {
		if _, err := e.q.ElectionTermsResign(ctx, e.db, p); err != nil {
			e.log.Warn("resign terms", "error", err)
			return
		}
	}
	if _, err := e.q.ElectionMemberLeave(ctx, e.db, e.id); err != nil {
		e.log.Warn("leave", "error", err)
	}
}

// Stats are the elector's counters since New.
type Stats struct {
	Elected       int64 // terms started (elections won or adopted)
	SteppedDown   int64 // terms ended, for any reason
	RenewFailures int64 // renewals that failed (error or timeout)
	RacesLost     int64 // takeovers that lost a race with another change
	Cycles        int64 // cycles run (Cycle calls), failed or not
	CycleErrors   int64 // cycles that failed
	FenceRejected int64 // Fence calls that returned ErrClaimLost
}

type counters struct {
	elected, steppedDown, renewFailures, racesLost, cycles, cycleErrors, fenceRejected atomic.Int64
}

// Stats returns the elector's counters.
func (e *Elector) Stats() Stats {
	s := &e.stats
	return Stats{Elected: s.elected.Load(), SteppedDown: s.steppedDown.Load(), RenewFailures: s.renewFailures.Load(),
		RacesLost: s.racesLost.Load(), Cycles: s.cycles.Load(), CycleErrors: s.cycleErrors.Load(), FenceRejected: s.fenceRejected.Load()}
}
