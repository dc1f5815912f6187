package chaos

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/batchclaim/batchclaim/dlt/dltsim"
	"github.com/batchclaim/batchclaim/testkit/history"
)

// check reads the history (from the current primary) and the ledger's record and counts
// every invariant's violations.
func (r *run) check(ctx context.Context) (Report, error) {
	c := r.cfg
	rep := Report{Seed: c.Seed, Replay: r.replay, Instances: c.Instances, ServiceIDs: c.ServiceIDs,
		DurationSeconds: time.Since(r.start).Seconds(), Faults: map[string]int{}, Violations: map[string]int{},
		Skipped: r.skipped, LogDir: r.logDir, Database: "throwaway primary with a synchronous standby"}
	if r.db.async {
		rep.Database = "throwaway primary with an ASYNCHRONOUS standby (a demonstration: the guarantees do not hold)"
	}
	if !r.db.own {
		rep.Database = "DATABASE_URL"
	}
	if r.db.ha != nil {
		ttl, loop, _ := r.db.ha.Timing()
		rep.Database = fmt.Sprintf("Patroni cluster: etcd and %d members, synchronous_mode strict, ttl %v, loop_wait %v", len(r.db.ha.Members()), ttl, loop)
		rep.PGRewinds = r.db.ha.Rewinds()
	}
	for _, k := range Kinds() {
		rep.Faults[k] = r.faults[k]
	}
	rep.HaltOnInvalid, rep.OpsSkipped, rep.Operations = r.halt, r.opsSkipped, map[string]int{}
	for _, k := range Operations() {
		rep.Operations[k] = r.opCounts[k]
	}
	rep.OperationLog = append(rep.OperationLog, r.ops...)
	rep.QuiesceResumes = r.quiesceResumes
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
	rep.Cancelled, rep.Discarded, rep.DeletedByRetention = batches.Cancelled, batches.Discarded, batches.Deleted
	rep.Violations[Lost] = batches.Lost
	rep.Violations[OrderViolations] = batches.OrderViolations
	rep.Violations[UnexplainedDuplicates] = batches.DuplicatePostsUnexplained
	rep.Problems = append(rep.Problems, batches.Problems...)
	seqs, err := r.seqs(ctx)
	if err != nil {
		return rep, err
	}
	for _, id := range batches.Unexplained {
		rep.Diagnoses = append(rep.Diagnoses, diagnoseDuplicate(id, posts, seqs))
	}
	for _, o := range batches.Reordered {
		rep.Diagnoses = append(rep.Diagnoses, r.diagnoseOrder(o.Service, o.EarlyID, o.LateID, seqs))
	}

	claims, err := history.CheckClaimsWith(ctx, r.pool, history.ClaimOptions{Deregistered: r.stopped})
	if err != nil {
		return rep, fmt.Errorf("check claims: %w", err)
	}
	rep.Acquisitions = claims.Acquisitions
	if d := r.dropIdleAfter(); d > 0 {
		rep.DropIdleAfterMs = d.Milliseconds()
		if err := r.pool.QueryRow(ctx, `SELECT count(*) FROM batchclaim.claim_events WHERE event = 'dropped'`).Scan(&rep.Dropped); err != nil {
			return rep, fmt.Errorf("count dropped claims: %w", err)
		}
	}
	if err := r.pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE EXISTS (
    SELECT 1 FROM batchclaim.batches b
    WHERE b.service_id = e.service_id AND b.created_at < e.at AND (b.finished_at IS NULL OR b.finished_at > e.at)))
FROM batchclaim.claim_events e WHERE e.event = 'surplus_released'`).Scan(&rep.SurplusReleased, &rep.SurplusWithWork); err != nil {
		return rep, fmt.Errorf("count surplus releases: %w", err)
	}
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
	for _, p := range out.Pairs {
		if seqs[p.Posted] < seqs[p.Outstanding] {
			rep.Diagnoses = append(rep.Diagnoses, r.diagnoseOrder(p.Service, p.Posted, p.Outstanding, seqs))
			continue
		}
		rep.Diagnoses = append(rep.Diagnoses, fmt.Sprintf("%s: seq %d posted while seq %d was still outstanding at the ledger: the head was handed out while an earlier batch was unfinished (defect 1, second part), or an UNKNOWN outcome was taken for finished",
			p.Service, seqs[p.Posted], seqs[p.Outstanding]))
	}

	owns, err := history.Ownerships(ctx, r.pool)
	if err != nil {
		return rep, fmt.Errorf("read ownerships: %w", err)
	}
	jobs, err := history.ReadJobs(ctx, r.pool)
	if err != nil {
		return rep, fmt.Errorf("read the jobs' history: %w", err)
	}
	slow, judged, problems := r.judgeTakeovers(owns, jobs)
	rep.Violations[SlowTakeovers], rep.TakeoversJudged = slow, judged
	rep.Problems = append(rep.Problems, problems...)
	rep.LeaderTakeovers = r.leaderTakeovers
	rep.Violations[SlowTakeovers] += len(r.slowLeader)
	rep.TakeoversJudged += len(r.leaderTakeovers)
	rep.Problems = append(rep.Problems, r.slowLeader...)

	regress, gaps, problems := r.checkFailovers(owns)
	rep.Violations[EpochRegressions] += regress
	rep.Violations[HistoryGaps] += gaps
	rep.Problems = append(rep.Problems, problems...)

	r.checkJobs(jobs, &rep)

	if r.unbalanced != "" {
		rep.Violations[Unbalanced] = 1
		rep.Problems = append(rep.Problems, r.unbalanced)
	}
	rep.Violations[StalledWork] = len(r.stalled)
	rep.Problems = append(rep.Problems, r.stalled...)
	rep.Violations[SlowWakeups] = len(r.slowWakeups)
	rep.Problems = append(rep.Problems, r.slowWakeups...)
	rep.Violations[BulkReports] = len(r.bulkReports)
	rep.Problems = append(rep.Problems, r.bulkReports...)
	return rep, nil
}

// seqs maps batch ids to their stored seq.
func (r *run) seqs(ctx context.Context) (map[string]int64, error) {
	rows, err := r.pool.Query(ctx, `SELECT batch_id, seq FROM batchclaim.batches`)
	if err != nil {
		return nil, fmt.Errorf("read seqs: %w", err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var id string
		var seq int64
		if err := rows.Scan(&id, &seq); err != nil {
			return nil, err
		}
		out[id] = seq
	}
	return out, rows.Err()
}

// diagnoseOrder explains why early (smaller seq) went to the ledger after late: when the
// client that stored early saw its COMMIT return after late's, the stored order (seq) was
// not the commit order.
func (r *run) diagnoseOrder(svc, early, late string, seqs map[string]int64) string {
	r.mu.Lock()
	e, eok := r.stores[early]
	l, lok := r.stores[late]
	r.mu.Unlock()
	if eok && lok && e.done.After(l.done) {
		return fmt.Sprintf("%s: seq %d (batch %s, stored via %s, transaction held open %v) committed at %s, after seq %d (via %s) committed at %s: "+
			"seq order is not commit order, so the queuer handed out seq %d before seq %d existed for it (defect 1)",
			svc, seqs[early], short(early), e.via, e.held, clock(e.done), seqs[late], l.via, clock(l.done), seqs[late], seqs[early])
	}
	return fmt.Sprintf("%s: seq %d went to the ledger after seq %d although it was stored first (stored %s via %s; %s via %s): not explained by the stored order",
		svc, seqs[early], seqs[late], clock(e.done), e.via, clock(l.done), l.via)
}

func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// checkFailovers verifies that every acquisition a primary had just before it was killed is on
// the primary that replaced it, with the same owner: a lost one is a gap in the history, and
// one whose epoch went to another instance is an epoch that repeated.
func (r *run) checkFailovers(owns map[string][]history.Ownership) (regress, gaps int, problems []string) {
	for _, a := range r.beforeFailover {
		var found *history.Ownership
		for i := range owns[a.service] {
			if owns[a.service][i].Epoch == a.epoch {
				found = &owns[a.service][i]
				break
			}
		}
		switch {
		case found == nil:
			gaps++
			problems = append(problems, fmt.Sprintf("%s: the acquisition of epoch %d by %s, committed on the old primary, is missing after the failover", a.service, a.epoch, a.instance))
		case found.Instance != a.instance:
			regress++
			problems = append(problems, fmt.Sprintf("%s: epoch %d was acquired by %s on the old primary and again by %s after the failover", a.service, a.epoch, a.instance, found.Instance))
		}
	}
	return regress, gaps, problems
}

// diagnoseDuplicate lists what the ledger answered to each POST of a batch posted more often
// than its unknown outcomes explain.
func diagnoseDuplicate(id string, posts []dltsim.Post, seqs map[string]int64) string {
	var effects []string
	svc, blind := "", false
	for _, p := range posts {
		if p.BatchID != id {
			continue
		}
		svc = p.Service
		effects = append(effects, fmt.Sprintf("%s %d", p.Effect, p.HTTPStatus))
		blind = blind || p.Effect == dltsim.EffectAcceptedError
	}
	why := "no answer in the ledger's record explains the repeat"
	if blind {
		why = "a 503 with code 17 (outcome unknown; the ledger had accepted it) was retried as if refused, and the attempt was not recorded as an unknown outcome (defect 8)"
	}
	return fmt.Sprintf("%s: seq %d (batch %s) POSTs: %s: %s", svc, seqs[id], short(id), strings.Join(effects, ", "), why)
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
// claim back itself (released, or dropped as idle). When the instances drop idle claim rows,
// a claim whose service_id had no unfinished batch at some instant between the fault and its
// bound (jobs' history; an operator's cancel can end its last one) is not judged either: once
// voided, its free row may be dropped (which records no claim event) instead of taken, and
// the next acquisition waits for the next batch; drop_idle_on counts from when it began.
func (r *run) judgeTakeovers(owns map[string][]history.Ownership, jobs history.JobHistory) (slow, judged int, problems []string) {
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
			if mine.End == "released" || mine.End == "surplus_released" || mine.End == "dropped" {
				continue // given back, not orphaned
			}
			if (c.DropIdleAfter > 0 || !r.dropIdleFrom.IsZero() && r.dropIdleFrom.Before(bound)) &&
				(!h.work || jobs.IdleBetween(h.service, v.at, bound)) {
				continue // nothing to take over at some point; the row may have been dropped
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

// checkJobs checks the key's promise from the jobs' history: at most one job of a service_id
// in flight at a time, every job stored or revived run, no terminal state left but by a
// recorded Retry, no attempt number drawn twice, and each row's unfinished and finished_at as
// its state says.
func (r *run) checkJobs(h history.JobHistory, rep *Report) {
	r.mu.Lock()
	promises := slices.Clone(r.promises)
	for id := range r.stores {
		promises = append(promises, history.Promise{Kind: history.PromiseStored, BatchID: id})
	}
	r.mu.Unlock()
	jobs := history.CheckJobs(h, promises)
	rep.Jobs = JobCounts{Jobs: jobs.Jobs, Changes: jobs.Changes, Retries: jobs.Retries, Deleted: jobs.Deleted, Promises: jobs.Promises}
	for _, c := range []struct {
		name string
		f    history.Finding
	}{{DoubleInFlight, jobs.DoubleInFlight}, {LostJobs, jobs.Lost}, {TerminalRegressions, jobs.TerminalRegressions},
		{RepeatedAttempts, jobs.RepeatedAttempts}, {RowMarks, jobs.RowMarks}} {
		rep.Violations[c.name] = c.f.Count
		for _, p := range c.f.Problems {
			rep.Problems = append(rep.Problems, c.name+": "+p)
		}
	}
}

func clock(t time.Time) string { return t.Format("15:04:05.000") }
