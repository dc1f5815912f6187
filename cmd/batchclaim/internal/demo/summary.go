package demo

import (
	"context"
	"time"

	"github.com/batchclaim/batchclaim/dlt/dltsim"
	"github.com/batchclaim/batchclaim/inspect"
	"github.com/batchclaim/batchclaim/testkit/history"
)

// summarize checks the run against the ledger's record.
func (d *demoRun) summarize(ctx context.Context) (Summary, error) {
	s := Summary{Instances: d.cfg.instances, ServiceIDs: d.cfg.serviceIDs, Flavor: string(d.cfg.flavor),
		Faults: d.faults, DurationSeconds: time.Since(d.start).Seconds()}
	rep, err := history.Check(ctx, d.pool, simLedger(d.sim))
	if err != nil {
		return s, err
	}
	s.BatchesTotal, s.Committed, s.Invalid, s.Lost = rep.Batches, rep.Committed, rep.Invalid, rep.Lost
	s.OrderViolations, s.DuplicatePosts, s.DuplicatePostsUnexplained = rep.OrderViolations, rep.DuplicatePosts, rep.DuplicatePostsUnexplained
	s.Posts = len(d.sim.Posts())
	for _, k := range d.kids {
		s.StaleWritesRejected += k.stale
	}
	n, err := inspect.Takeovers(ctx, d.pool)
	if err != nil {
		return s, err
	}
	s.Takeovers = int(n)
	for _, v := range d.victims {
		delays, err := inspect.TakeoverDelays(ctx, d.pool, v.id, v.at)
		if err != nil {
			return s, err
		}
		for _, dl := range delays {
			if dl.Seconds < 0 {
				dl.Seconds = s.DurationSeconds // never taken back
			}
			s.MaxTakeoverSeconds = max(s.MaxTakeoverSeconds, dl.Seconds)
		}
	}
	// Printed once every read succeeded: a read that fails is tried again from the start.
	for _, p := range rep.Problems {
		d.out.Write([]byte("  problem: " + p + "\n")) //nolint:errcheck
	}
	return s, nil
}

// simLedger turns the simulator's record into what history.Check compares with.
func simLedger(sim *dltsim.Sim) history.Ledger {
	return history.SimLedger(sim.Committed(), func(yield func(string, string) bool) {
		for _, p := range sim.Posts() {
			if !yield(p.BatchID, p.Effect) {
				return
			}
		}
	})
}
