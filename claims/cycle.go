package claims

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/batchclaim/batchclaim/internal/db"
)

// Share is the fair-share arithmetic of one cycle.
type Share struct {
	ServiceIDs    int // service_ids known to the claims table
	LiveInstances int // instances whose lease is in phase one
	Rank          int // this instance's place among them (ordered by id), -1 if not live
	Target        int // claims this instance should hold
}

// fairShare splits k service_ids over the live instances: everybody gets k/n, and the first
// k%n instances in id order one more. The targets add up to exactly k, so once every instance
// holds its target no claim is free and no two instances differ by more than one.
func fairShare(k int, live []string, self string) Share {
	s := Share{ServiceIDs: k, LiveInstances: len(live), Rank: slices.Index(live, self)}
	if s.Rank < 0 || len(live) == 0 {
		return s
	}
	n := len(live)
	s.Target = k / n
	if s.Rank < k%n {
		s.Target++
	}
	return s
}

// CycleReport says what one cycle changed.
type CycleReport struct {
	Share    Share
	Held     int      // claims held after the cycle
	Gained   []string // service_ids gained (acquired, or re-adopted after a fence)
	Lost     []string // service_ids the database no longer lists as ours
	Voided   []Voided // expired claims of other (dead or hung) instances freed by this cycle
	Released int      // surplus claims given back for fair share
	Retries  int      // serialization retries this cycle needed
}

// Cycle runs one claim cycle:
//
//  1. renew the lease, unless the lease loop started by Run does that on its own connection:
//     one short UPDATE of this instance's row, outside the serializable transaction (writing
//     it inside multiplies serialization failures);
//  2. read the fair-share inputs (plain reads: they are advice, not safety);
//  3. in one SERIALIZABLE transaction, retried on 40001/40P01: void expired claims (two-phase),
//     read our own claims, take free ones up to the target, and give back idle surplus once we
//     have been over the target for two cycles in a row;
//  4. reconcile the in-memory claim set with what the database says we hold.
func (e *Engine) Cycle(ctx context.Context) (CycleReport, error) {
	e.stats.cycles.Add(1)
	var rep CycleReport
	if !e.leaseRunning() { // driven by Cycle alone: renew here
		if err := e.heartbeat(ctx, e.pool); err != nil {
			e.stats.cycleErrors.Add(1)
			return rep, err
		}
	}
	share, err := e.census(ctx)
	if err != nil {
		e.stats.cycleErrors.Add(1)
		return rep, err
	}
	rep.Share = share

	e.mu.Lock()
	releaseSurplus := e.overCycles >= 1
	e.mu.Unlock()

	var dbHeld []db.ClaimsHeldRow
	err = serializable(ctx, e.pool, e.cfg.MaxSerializationRetries, e.GuardTx, func() {
		rep.Retries++
		e.stats.serializationRetries.Add(1)
	}, func(tx pgx.Tx) error {
		var err error
		dbHeld, rep.Voided, rep.Released, err = e.claimTx(ctx, tx, share, releaseSurplus)
		return err
	})
	if err != nil {
		e.stats.cycleErrors.Add(1)
		if isSerializationFailure(err) {
			e.stats.serializationGiveUps.Add(1)
		}
		return rep, fmt.Errorf("claim cycle: %w", err)
	}
	e.stats.voided.Add(int64(len(rep.Voided)))
	for _, v := range rep.Voided {
		e.log.Info("claim voided: owner's lease expired", "service_id", v.ServiceID, "epoch", v.Epoch, "owner", v.Owner.String(), "event", v.Phase)
	}

	e.mu.Lock()
	if len(dbHeld) > share.Target+e.cfg.ShareSlack && share.Rank >= 0 {
		e.overCycles++
	} else {
		e.overCycles = 0
	}
	e.share = share
	e.cycles++
	prune := e.cycles%10 == 1 && e.cfg.PruneAfter > 0
	e.mu.Unlock()

	gained, lost := e.reconcile(dbHeld)
	rep.Held = len(dbHeld)
	for _, c := range gained {
		rep.Gained = append(rep.Gained, c.ServiceID)
	}
	for _, c := range lost {
		rep.Lost = append(rep.Lost, c.ServiceID)
	}
	e.notifyLost(lost, LossTaken)
	e.notifyGained(gained)
	if e.cfg.OnVoided != nil {
		for _, v := range rep.Voided {
			e.cfg.OnVoided(v)
		}
	}
	if prune {
		e.prune(ctx)
	}
	return rep, nil
}

func (e *Engine) census(ctx context.Context) (Share, error) {
	now, err := e.dbNow(ctx, e.pool)
	if err != nil {
		return Share{}, fmt.Errorf("read fair-share inputs: %w", err)
	}
	c, err := e.q.ClaimsCensus(ctx, e.pool)
	if err != nil {
		return Share{}, fmt.Errorf("count service_ids: %w", err)
	}
	ids, err := e.q.InstancesLive(ctx, e.pool, now)
	if err != nil {
		return Share{}, fmt.Errorf("list live instances: %w", err)
	}
	live := make([]string, len(ids))
	for i, id := range ids {
		live[i] = id.String()
	}
	return fairShare(int(c.ServiceIds), live, e.cfg.InstanceID.String()), nil
}

// claimTx is the body of the serializable transaction.
func (e *Engine) claimTx(ctx context.Context, tx pgx.Tx, share Share, releaseSurplus bool) (held []db.ClaimsHeldRow, voided []Voided, released int, err error) {
	now, err := e.dbNow(ctx, tx)
	if err != nil {
		return nil, nil, 0, err
	}
	owned, err := e.q.InstanceOwned(ctx, tx, db.InstanceOwnedParams{ID: e.cfg.InstanceID, Nonce: e.nonce})
	if err != nil {
		return nil, nil, 0, fmt.Errorf("check own lease: %w", err)
	}
	if !owned {
		return nil, nil, 0, fmt.Errorf("claim cycle: %w: the registry row of %s belongs to another process", ErrInstanceIDInUse, e.cfg.InstanceID)
	}
	v, err := e.q.ClaimsVoidExpired(ctx, tx, now)
	if err != nil {
		return nil, nil, 0, fmt.Errorf("void expired claims: %w", err)
	}
	for _, r := range v {
		voided = append(voided, Voided{ServiceID: r.ServiceID, Owner: r.InstanceID, Epoch: r.Epoch, Phase: r.Event})
	}
	held, err = e.q.ClaimsHeld(ctx, tx, e.cfg.InstanceID)
	if err != nil {
		return nil, nil, 0, fmt.Errorf("read own claims: %w", err)
	}
	switch want := share.Target - len(held); {
	case share.Rank < 0:
		// Our lease is not in phase one by the database clock: take nothing.
	case want > 0:
		got, err := e.q.ClaimsAcquire(ctx, tx, db.ClaimsAcquireParams{
			Max: int32(want), Start: rand.Int64() - rand.Int64(), Claimant: e.cfg.InstanceID, Now: now,
		})
		if err != nil {
			return nil, nil, 0, fmt.Errorf("acquire claims: %w", err)
		}
		for _, g := range got {
			held = append(held, db.ClaimsHeldRow{ServiceID: g.ServiceID, Epoch: g.Epoch, ClaimedAt: g.ClaimedAt})
		}
	case -want > e.cfg.ShareSlack && releaseSurplus:
		held, released, err = e.releaseSurplus(ctx, tx, held, -want)
		if err != nil {
			return nil, nil, 0, err
		}
	}
	if e.testHookBeforeCommit != nil {
		e.testHookBeforeCommit()
	}
	return held, voided, released, nil
}

// releaseSurplus gives back up to n idle claims, the most recently acquired first.
func (e *Engine) releaseSurplus(ctx context.Context, tx pgx.Tx, held []db.ClaimsHeldRow, n int) ([]db.ClaimsHeldRow, int, error) {
	idle := make([]db.ClaimsHeldRow, 0, len(held))
	for _, h := range held {
		if h.SubmittingSince == nil {
			idle = append(idle, h)
		}
	}
	slices.SortFunc(idle, func(a, b db.ClaimsHeldRow) int { return timeOf(b.ClaimedAt).Compare(timeOf(a.ClaimedAt)) })
	idle = idle[:min(n, len(idle))]
	give := make([]Claim, len(idle))
	for i, h := range idle {
		give[i] = Claim{ServiceID: h.ServiceID, Epoch: h.Epoch}
	}
	released, err := e.release(ctx, tx, give, "surplus_released", true)
	if err != nil {
		return nil, 0, fmt.Errorf("release surplus: %w", err)
	}
	gone := map[string]bool{}
	for _, c := range give {
		gone[c.ServiceID] = true
	}
	kept := held[:0:0]
	for _, h := range held {
		if !gone[h.ServiceID] {
			kept = append(kept, h)
		}
	}
	e.log.Info("released surplus claims over fair share", "released", released)
	return kept, released, nil
}

// reconcile makes the in-memory set equal to what the database says we hold.
func (e *Engine) reconcile(rows []db.ClaimsHeldRow) (gained, lost []Claim) {
	e.mu.Lock()
	defer e.mu.Unlock()
	inDB := make(map[string]db.ClaimsHeldRow, len(rows))
	for _, r := range rows {
		inDB[r.ServiceID] = r
	}
	for id, h := range e.held {
		if r, ok := inDB[id]; !ok || r.Epoch != h.claim.Epoch {
			h.cancel()
			delete(e.held, id)
			lost = append(lost, h.claim)
		}
	}
	if !e.usableLocked() {
		return gained, lost // past the local deadline: adopt nothing until a renewal succeeds
	}
	for id, r := range inDB {
		if _, ok := e.held[id]; ok {
			continue
		}
		ctx, cancel := context.WithCancel(e.base)
		c := Claim{ServiceID: id, Epoch: r.Epoch, ClaimedAt: timeOf(r.ClaimedAt)}.WithContext(ctx)
		e.held[id] = &heldClaim{claim: c, cancel: cancel}
		gained = append(gained, c)
	}
	return gained, lost
}

func (e *Engine) prune(ctx context.Context) {
	now, err := e.dbNow(ctx, e.pool)
	if err == nil {
		var n int64
		n, err = e.q.InstancesPrune(ctx, e.pool, db.InstancesPruneParams{Now: now, OlderThanMs: e.cfg.PruneAfter.Milliseconds()})
		if n > 0 {
			e.log.Info("pruned dead instances from the registry", "instances", n)
		}
	}
	if err != nil && ctx.Err() == nil {
		e.log.Warn("prune instances", "error", err)
	}
}

func timeOf(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return *t
}
