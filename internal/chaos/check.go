package chaos

import (
	"context"
	"fmt"
	"time"

	"github.com/batchclaim/batchclaim/dlt/dltsim"
	"github.com/batchclaim/batchclaim/internal/history"
)

// check reads the history (from the current primary) and the ledger's record and counts
// every invariant's violations.
func (r *run) check(ctx context.Context) (Report, error) {
	c := r.cfg
	rep := Report{Seed: c.Seed, Replay: replayCommand(c), Instances: c.Instances, ServiceIDs: c.ServiceIDs,
		DurationSeconds: time.Since(r.start).Seconds(), Faults: map[string]int{}, Violations: map[string]int{},
		Skipped: r.skipped, LogDir: r.logDir, Database: "throwaway primary with a synchronous standby"}
	if !r.db.own {
		rep.Database = "DATABASE_URL"
	}
	for _, k := range Kinds() {
		rep.Faults[k] = r.faults[k]
	}
	for _, k := range Invariants() {
		rep.Violations[k] = 0
	}
	rep.Problems = append(rep.Problems, r.problems...)
	posts, settled := r.sim.Posts(), r.sim.Settled()
	rep.Posts = len(posts)

	ledger := history.SimLedger(r.sim.Committed(), func(yield func(string, string) bool) {
		for _, p := range posts {
			if !yield(p.BatchID, p.Effect) {
				return
			}
		}
	})
	batches, err := history.Check(ctx, r.pool, ledger)
	if err != nil {
		return rep, fmt.Errorf("check batches: %w", err)
	}
	rep.Batches, rep.Committed, rep.Invalid, rep.DuplicatePosts = batches.Batches, batches.Committed, batches.Invalid, batches.DuplicatePosts
	rep.Violations[Lost] = batches.Lost
	rep.Violations[OrderViolations] = batches.OrderViolations
	rep.Violations[UnexplainedDuplicates] = batches.DuplicatePostsUnexplained
	rep.Problems = append(rep.Problems, batches.Problems...)

	claims, err := history.CheckClaims(ctx, r.pool)
	if err != nil {
		return rep, fmt.Errorf("check claims: %w", err)
	}
	rep.Acquisitions = claims.Acquisitions
	rep.Violations[DoubleOwner] = claims.DoubleOwners
	rep.Violations[EpochRegressions] = claims.EpochRegressions
	rep.Violations[HistoryGaps] = claims.Gaps
	rep.Problems = append(rep.Problems, claims.Problems...)

	writes, err := history.CheckWrites(ctx, r.pool)
	if err != nil {
		return rep, fmt.Errorf("check writes: %w", err)
	}
	rep.Writes = writes.Writes
	rep.Violations[StaleWritesAccepted] = writes.StaleAccepted
	rep.Problems = append(rep.Problems, writes.Problems...)

	out := history.CheckOutstanding(ledgerEvents(posts, settled))
	rep.Violations[DoubleOutstanding] = out.DoubleOutstanding
	rep.Problems = append(rep.Problems, out.Problems...)

	owns, err := history.Ownerships(ctx, r.pool)
	if err != nil {
		return rep, fmt.Errorf("read ownerships: %w", err)
	}
	slow, judged, problems := r.judgeTakeovers(owns)
	rep.Violations[SlowTakeovers], rep.TakeoversJudged = slow, judged
	rep.Problems = append(rep.Problems, problems...)

	if r.unbalanced != "" {
		rep.Violations[Unbalanced] = 1
		rep.Problems = append(rep.Problems, r.unbalanced)
	}
	return rep, nil
}

// ledgerEvents merges the simulator's POSTs and settlements in the order it saw them.
func ledgerEvents(posts []dltsim.Post, settled []dltsim.Settlement) []history.LedgerEvent {
	out := make([]history.LedgerEvent, 0, len(posts)+len(settled))
	j := 0
	for i, p := range posts {
		for ; j < len(settled) && settled[j].AfterPosts <= i; j++ {
			s := settled[j]
			out = append(out, history.LedgerEvent{Settle: true, BatchID: s.BatchID, Service: s.Service, At: s.At})
		}
		out = append(out, history.LedgerEvent{BatchID: p.BatchID, Service: p.Service, Effect: p.Effect, At: p.At})
	}
	for _, s := range settled[j:] {
		out = append(out, history.LedgerEvent{Settle: true, BatchID: s.BatchID, Service: s.Service, At: s.At})
	}
	return out
}

// judgeTakeovers checks that every claim a victim held was taken by another instance within
// its bound: the victim's lease expiry-1 (idle claim) or expiry-2 (busy claim), as the lease
// stood when the outage ended, plus two renew intervals plus the scheduling allowance. A
// claim is judged only when the outage outlasted its bound and the victim did not give the
// claim back itself.
func (r *run) judgeTakeovers(owns map[string][]history.Ownership) (slow, judged int, problems []string) {
	c := r.cfg
	slack := 2*c.Renew + c.Allowance
	for _, v := range r.victims {
		if v.at.IsZero() || v.e1.IsZero() {
			continue
		}
		for _, h := range v.held {
			bound := v.e1.Add(slack)
			if h.busy {
				bound = v.e2.Add(slack)
			}
			if !v.until.IsZero() && v.until.Before(bound) {
				continue // back before the claim had to be taken
			}
			var mine *history.Ownership
			var next *history.Ownership
			for i := range owns[h.service] {
				o := &owns[h.service][i]
				switch {
				case o.Epoch == h.epoch:
					mine = o
				case o.Epoch > h.epoch && next == nil:
					next = o
				}
			}
			if mine == nil || mine.Instance != v.id {
				continue
			}
			if mine.End == "released" || mine.End == "surplus_released" {
				continue // given back, not orphaned
			}
			judged++
			switch {
			case next == nil:
				slow++
				problems = append(problems, fmt.Sprintf("%s: held by %s (%s at %s, busy %t) never taken again (bound %s)",
					h.service, v.name, v.kind, clock(v.at), h.busy, clock(bound)))
			case next.From.After(bound):
				slow++
				problems = append(problems, fmt.Sprintf("%s: held by %s (%s at %s, busy %t) taken %.2fs after its bound %s (lease expiry-1 %s, expiry-2 %s)",
					h.service, v.name, v.kind, clock(v.at), h.busy, next.From.Sub(bound).Seconds(), clock(bound), clock(v.e1), clock(v.e2)))
			}
		}
	}
	return slow, judged, problems
}

func clock(t time.Time) string { return t.Format("15:04:05.000") }
