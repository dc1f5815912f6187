package node

import (
	"fmt"
	"time"
)

// progress tells the claim engine, before each lease renewal, whether this instance's work on
// the claims it holds moves (the engine's claims.Config.Progress hook): while it does not, the lease is not
// renewed, the local deadline fences the instance and its claims pass to live peers. The
// bound is twice the claims' Expiry1 (2 x T1): the claim cycle and the fetches run every
// RenewInterval (at most T1/3), so a bound of 2 x T1 is several missed rounds, not one slow
// statement on a loaded machine. A peer takes over within about 3 x T1 (2 x T1 + T2 for a
// claim with a POST in flight) of the moment the work stopped (docs/claims.md, "The key's
// promise"). An instance that holds no claim, in memory or by the database's last word,
// always moves.
//
// Work does not move when for 2 x T1 neither a fetch round nor a claim cycle's survey got an
// answer through the instance's pool (a pool an embedder's own work holds whole, a stuck
// server), or when a Submit call runs more than 2 x T1 past its deadline (a Submitter that
// ignores its context keeps its worker and its key for good).
//
// A stopping instance always moves: it fetches nothing and runs no claim cycle while its
// running jobs drain (bounded by MaxSubmission and StopTime), and its lease must last until
// they end.
func (b *backEdge) progress() error {
	if b.stopping.Load() {
		return nil
	}
	surveyed, dbHeld := b.eng.LastSurvey()
	if max(b.eng.Stats().Held, dbHeld) == 0 {
		return nil
	}
	bound := 2 * b.eng.Timings().Expiry1
	now := time.Now()
	last := b.queue.LastRound()
	if surveyed.After(last) {
		last = surveyed
	}
	if !last.IsZero() && now.Sub(last) > bound {
		return fmt.Errorf("no statement of the data path or the claim cycle was answered through the pool for %s (more than 2 x Expiry1, %s): other work may hold the pool, or the database does not answer", now.Sub(last).Round(time.Millisecond), bound)
	}
	if k := b.workers.Overdue(now, bound); k > 0 {
		return fmt.Errorf("%d job(s) still running more than %s (2 x Expiry1) past their deadline: the Submitter does not return when its context ends", k, bound)
	}
	return nil
}
