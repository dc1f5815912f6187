package claims

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/batchclaim/batchclaim/internal/db"
	"github.com/batchclaim/batchclaim/internal/tracing"
	"github.com/batchclaim/batchclaim/pgdb"
)

// CycleReport says what one cycle changed.
type CycleReport struct {
	Share    Share
	Held     int      // claims held after the cycle
	Gained   []string // service_ids gained (acquired, or re-adopted after a fence)
	Lost     []string // service_ids the database no longer lists as ours
	Voided   []Voided // expired claims of other (dead or hung) instances freed by this cycle
	Released int      // surplus claims given back for fair share
	Dropped  int      // idle claim rows deleted (Config.DropIdleAfter)
	Retries  int      // statements of this cycle run again after a transient conflict
}

// Cycle runs one claim cycle:
//
//  1. renew the lease, unless the lease loop started by Run does that on its own connection;
//  2. survey, in one statement: whether the registry row is still ours, the live instances,
//     the number of service_ids and free ones, whether any claim waits to be voided, a
//     fingerprint of our own claims and how many of them are idle past DropIdleAfter;
//  3. only if the survey says there is something to do: void expired claims (two-phase),
//     take free ones up to the fair-share target (surveying again between chunks of a large
//     acquisition, so peers that registered meanwhile count), give back idle surplus once we have been
//     over the target for two cycles in a row, drop idle claim rows. Each is a READ COMMITTED
//     statement over a bounded chunk of rows that skips rows others have locked, so one
//     locked row delays no one and no statement holds many locks for long;
//  4. reconcile the in-memory claim set with what the database says we hold, reading our
//     claims only when the fingerprint or our own writes say they changed.
//
// An instance with nothing to change sends one statement per cycle (two with the renewal).
func (e *Engine) Cycle(ctx context.Context) (CycleReport, error) {
	e.stats.cycles.Add(1)
	ctx, span := tracing.Start(ctx, tracing.ClaimCycle)
	start := time.Now()
	rep, err := e.cycle(ctx)
	e.stats.cycleTime.observe(time.Since(start))
	span.SetAttributes(tracing.Claims.Int(rep.Held))
	if err != nil {
		e.stats.cycleErrors.Add(1)
		err = fmt.Errorf("claim cycle: %w", err)
	}
	tracing.End(span, err)
	return rep, err
}

func (e *Engine) cycle(ctx context.Context) (CycleReport, error) {
	var rep CycleReport
	if !e.leaseRunning() { // driven by Cycle alone: renew here
		if err := e.heartbeat(ctx, e.db); err != nil {
			return rep, err
		}
	}
	now, err := e.clock.Now(ctx, e.db)
	if err != nil {
		return rep, err
	}
	sv, fig, err := e.survey(ctx, now, e.surveyCount())
	if err != nil {
		return rep, err
	}
	if e.checkSurvey(ctx, sv) != "" { // guard.go: no new work
		return rep, nil
	}
	p := newPlan(fig, e.cfg.InstanceID.String(), e.cfg.ShareSlack, e.cfg.DropIdleAfter > 0)
	rep.Share = p.share

	if sv.Voidable {
		rep.Voided, err = e.voidExpired(ctx, now, &rep)
		// Voids are committed as they go: count and report them even if a later step fails.
		e.reportVoided(rep.Voided)
		if err != nil {
			return rep, err
		}
		p.voided(len(rep.Voided))
	}

	e.mu.Lock()
	overBefore := e.overCycles >= 1
	known := e.fingerprintLocked() == fingerprint{sv.Held, sv.EpochSum}
	e.mu.Unlock()

	draining := false
	if p.dropFreeFirst() {
		dropped, more, err := e.dropIdle(ctx, now, &rep, true)
		if err != nil {
			return rep, err
		}
		rep.Dropped += len(dropped)
		draining = more
		p.dropped(len(dropped))
		rep.Share = p.share
	}

	wrote := false
	held := int(sv.Held)
	var rows []db.ClaimsHeldRow // our claims as the database lists them, once read
	switch kind, n := p.take(draining, overBefore); kind {
	case takeWithWork:
		got, err := e.acquireWithWork(ctx, now, n, len(fig.Live), &rep)
		if err != nil {
			return rep, err
		}
		wrote = got > 0
	case takeFree:
		got, err := e.acquire(ctx, now, n, held == 0, &rep, func(ctx context.Context) (int, error) {
			sv, fig, err := e.survey(ctx, now, countNever) // the service_ids this cycle counted
			if errors.Is(err, ErrInstanceIDInUse) {
				return 0, err
			}
			if err != nil || e.checkSurvey(ctx, sv) != "" {
				// Stop taking; the cycle still adopts what it took. The next cycle's survey
				// meets the error again if it lasts.
				e.log.Debug("claim cycle: stopped acquiring after a survey failed", "error", err)
				return 0, nil
			}
			left := p.retake(fig)
			rep.Share = p.share
			return left, nil
		})
		if err != nil {
			return rep, err
		}
		wrote = got > 0
	case giveSurplus:
		if rows, err = e.readHeld(ctx); err != nil {
			return rep, err
		}
		if rep.Released, err = e.releaseSurplus(ctx, rows, n, &rep); err != nil {
			return rep, err
		}
		wrote = rep.Released > 0
	}
	if p.dropOwnIdle() {
		dropped, _, err := e.dropIdle(ctx, now, &rep, false)
		if err != nil {
			return rep, err
		}
		rep.Dropped += len(dropped)
		wrote = wrote || len(dropped) > 0
	}

	if known && !wrote && rows == nil {
		// Nothing changed: the in-memory set is what the database lists.
		rep.Held = held
	} else {
		if rows == nil || wrote {
			if rows, err = e.readHeld(ctx); err != nil {
				return rep, err
			}
		}
		rep.Held = len(rows)
		gained, lost := e.reconcile(rows)
		for _, c := range gained {
			rep.Gained = append(rep.Gained, c.ServiceID)
		}
		for _, c := range lost {
			rep.Lost = append(rep.Lost, c.ServiceID)
		}
		e.notifyLost(lost, LossTaken)
		e.notifyGained(gained)
	}

	over := p.over(rep.Held)
	if !over {
		e.yieldOnly(nil) // within the share again (surplus released, or a peer left): no claim yields
	}
	e.mu.Lock()
	if over {
		e.overCycles++
	} else {
		e.overCycles = 0
	}
	e.cycles++
	if rep.Dropped > 0 {
		e.counted = -1 // fewer service_ids now: the next survey counts them
	}
	prune := e.cycles%10 == 1 && e.cfg.PruneAfter > 0
	e.mu.Unlock()

	if prune {
		e.prune(ctx)
	}
	return rep, nil
}

// When a survey counts the service_ids (ClaimsSurvey's count_all). Counting reads every row of
// the claims table, which every instance of a fleet would do at every cycle; the number changes
// only when service_ids come (as free rows) or go (dropped).
const (
	countNever  = 0 // a survey between chunks of one acquisition: the cycle's first survey counted, or its count holds
	countIfFree = 1 // count only if some row is free: a new service_id is a free row
	countAlways = 2
	// recountCycles: count at least every this many cycles, for rows another instance or an
	// operator deleted (which free no row) and rows this engine did not see come and go.
	recountCycles = 10
)

// surveyCount says when the cycle's first survey counts the service_ids: every recountCycles
// cycles, and when the previous cycle ended over the fair share (this one may give claims back,
// and must not do it on an old count); otherwise only if some row is free. (survey counts
// whatever it is asked while it has no count.) In between the engine goes on with the count it
// read last.
func (e *Engine) surveyCount() int32 {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.cycles%recountCycles == 0 || e.overCycles >= 1 {
		return countAlways
	}
	return countIfFree
}

// freeCap is how far the survey counts free rows: whether any is free is all the plan needs,
// except that a cycle that drops idle free rows needs to know whether more than it can drop
// (dropChunksPerCycle chunks) are free.
func (e *Engine) freeCap() int32 {
	if e.cfg.DropIdleAfter > 0 {
		return int32(dropChunksPerCycle*min(e.cfg.ChunkSize, dropChunk) + 1)
	}
	return 1
}

// survey reads what the cycle plans from, in one statement (ClaimsSurvey), and refuses a
// registry row that another process took over. count says whether it counts the service_ids
// (countNever, countIfFree, countAlways); when it does not, the figures carry the last count.
func (e *Engine) survey(ctx context.Context, now *time.Time, count int32) (db.ClaimsSurveyRow, figures, error) {
	e.mu.Lock()
	if e.counted < 0 {
		count = countAlways
	}
	e.mu.Unlock()
	sctx, cancel := e.stmtCtx(ctx)
	defer cancel()
	sv, err := e.q.ClaimsSurvey(sctx, e.db, db.ClaimsSurveyParams{
		Claimant: e.cfg.InstanceID, Nonce: e.nonce, Now: now, CountAll: count, IdleMs: e.cfg.DropIdleAfter.Milliseconds(),
		FreeCap: e.freeCap(),
	})
	if err != nil {
		return sv, figures{}, fmt.Errorf("survey: %w", err)
	}
	e.mu.Lock()
	if sv.ServiceIds >= 0 {
		e.counted = sv.ServiceIds
	} else {
		sv.ServiceIds = e.counted
	}
	e.mu.Unlock()
	e.stats.surveyHeld.Store(sv.Held)
	e.stats.surveyAt.Store(time.Now().UnixNano())
	if !sv.Owned {
		return sv, figures{}, fmt.Errorf("%w: the registry row of %s belongs to another process", ErrInstanceIDInUse, e.cfg.InstanceID)
	}
	live := make([]string, len(sv.Live))
	for i, id := range sv.Live {
		live[i] = id.String()
	}
	return sv, figures{ServiceIDs: int(sv.ServiceIds), Free: int(sv.Free), Held: int(sv.Held), Idle: int(sv.Idle), Live: live}, nil
}

// reportVoided counts, logs and hands to OnVoided the claims a cycle voided.
func (e *Engine) reportVoided(voided []Voided) {
	e.stats.voided.Add(int64(len(voided)))
	for _, v := range voided {
		e.log.Info("claim voided: owner's lease expired", "service_id", v.ServiceID, "epoch", v.Epoch, "owner", v.Owner.String(), "event", v.Phase)
		if e.cfg.OnVoided != nil {
			e.cfg.OnVoided(v)
		}
	}
}

// readHeld reads this instance's claims as the database lists them.
func (e *Engine) readHeld(ctx context.Context) ([]db.ClaimsHeldRow, error) {
	ctx, cancel := e.stmtCtx(ctx)
	defer cancel()
	rows, err := e.q.ClaimsHeld(ctx, e.db, e.cfg.InstanceID)
	if err != nil {
		return nil, fmt.Errorf("read own claims: %w", err)
	}
	return rows, nil
}

// stmtCtx bounds one statement of the cycle by expiry-1: a statement stuck on a connection
// that hangs (a database link frozen without a reset, while the lease loop redials and keeps
// the lease alive) is given up, its connection closed, and the next try or cycle works on a
// fresh one. A long cycle of many statements is not cut short.
func (e *Engine) stmtCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, e.cfg.Expiry1)
}

// fingerprint identifies a set of claims well enough to notice a change: only this
// instance's own statements add claims to its set, and every acquisition draws a new epoch, so
// a set that lost or gained claims has another count or another sum of epochs.
type fingerprint struct{ count, epochSum int64 }

func (e *Engine) fingerprintLocked() fingerprint {
	if !e.usableLocked() {
		return fingerprint{-1, -1} // fenced: nothing is adopted until a renewal, so always re-read
	}
	f := fingerprint{count: int64(len(e.held))}
	for _, h := range e.held {
		f.epochSum += h.claim.Epoch
	}
	return f
}

// retried runs one statement of the cycle, again after a transient conflict (a deadlock, a
// lock timeout), with jittered backoff. Each try runs under a context bounded by
// statementTimeout (see stmtCtx).
func (e *Engine) retried(ctx context.Context, rep *CycleReport, what string, fn func(context.Context) error) error {
	err := retry(ctx, e.cfg.MaxSerializationRetries, func() { rep.Retries++; e.stats.serializationRetries.Add(1) }, func() error {
		sctx, cancel := e.stmtCtx(ctx)
		defer cancel()
		return fn(sctx)
	})
	if err != nil {
		if pgdb.Conflict(err) {
			e.stats.serializationGiveUps.Add(1)
		}
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// voidExpired frees the claims of instances past their expiries, a chunk at a time, until a
// chunk comes back short (every other voidable row is being voided by someone else, or none
// is left). Each chunk is a transaction of two statements: the first locks the claims that look
// void, skipping rows others have locked; the second, whose snapshot comes after those locks,
// frees the ones still void. A claim is busy (kept in phase two) while its head batch is in
// flight under it, and the data path marks a batch in flight under a shared lock on the claim
// row: a mark that committed before the lock is seen by the second statement, and one that
// comes after it finds the claim gone.
func (e *Engine) voidExpired(ctx context.Context, now *time.Time, rep *CycleReport) ([]Voided, error) {
	var out []Voided
	for {
		var (
			voided []db.ClaimsVoidRow
			locked int
		)
		err := e.retried(ctx, rep, "void expired claims", func(ctx context.Context) error {
			voided, locked = nil, 0
			return runTx(ctx, e.db, pgx.TxOptions{}, e.GuardTx, func(tx pgx.Tx) error {
				cand, err := e.q.ClaimsLockVoidable(ctx, tx, db.ClaimsLockVoidableParams{Now: now, Max: int32(e.cfg.ChunkSize)})
				if err != nil || len(cand) == 0 {
					return err
				}
				locked = len(cand)
				p := db.ClaimsVoidParams{Now: now}
				for _, c := range cand {
					if c.Claimant == nil {
						continue
					}
					p.ServiceIds, p.Claimants, p.Epochs = append(p.ServiceIds, c.ServiceID), append(p.Claimants, c.Claimant.String()), append(p.Epochs, c.Epoch)
				}
				voided, err = e.q.ClaimsVoid(ctx, tx, p)
				return err
			})
		})
		if err != nil {
			return out, err
		}
		for _, r := range voided {
			out = append(out, Voided{ServiceID: r.ServiceID, Owner: r.InstanceID, Epoch: r.Epoch, Phase: r.Event})
		}
		if locked < e.cfg.ChunkSize {
			return out, nil
		}
	}
}

// acquire takes up to want free claims, a chunk at a time, each chunk starting at a random
// point of the free index so that concurrent acquirers mostly read different rows. It stops
// when a chunk comes back short. After each full chunk, when more are wanted, left says how
// many are still to take, from a fresh survey that does not count the service_ids again
// (countNever): instances that joined meanwhile lower the target. An instance that holds
// nothing yet (newcomer) takes at most half of what it wants in its first chunk, so that it
// surveys again even when all of it fits in one chunk: instances of a fleet that start
// together register milliseconds apart, and the first to cycle would otherwise take every
// claim in one statement and give half of them back cycles later.
func (e *Engine) acquire(ctx context.Context, now *time.Time, want int, newcomer bool, rep *CycleReport, left func(context.Context) (int, error)) (int, error) {
	got := 0
	for chunks := 1; want > 0; chunks++ {
		n := min(want, e.cfg.ChunkSize)
		if newcomer && chunks == 1 && want > 1 {
			n = min(n, (want+1)/2)
		}
		var rows []db.ClaimsAcquireRow
		err := e.retried(ctx, rep, "acquire claims", func(ctx context.Context) (err error) {
			rows, err = e.q.ClaimsAcquire(ctx, e.db, db.ClaimsAcquireParams{
				Max: int32(n), Start: rand.Int64() - rand.Int64(), Claimant: e.cfg.InstanceID, Now: now,
			})
			return err
		})
		if err != nil {
			return got, err
		}
		got += len(rows)
		if len(rows) < n {
			break
		}
		if want -= n; want > 0 {
			if want, err = left(ctx); err != nil {
				return got, err
			}
		}
	}
	return got, nil
}

// acquireWithWork takes up to want free claims of service_ids with unfinished work, a
// chunk at a time and no more than a fair part of them among live instances.
func (e *Engine) acquireWithWork(ctx context.Context, now *time.Time, want, live int, rep *CycleReport) (int, error) {
	var rows []db.ClaimsAcquireWithWorkRow
	err := e.retried(ctx, rep, "acquire claims with work", func(ctx context.Context) (err error) {
		rows, err = e.q.ClaimsAcquireWithWork(ctx, e.db, db.ClaimsAcquireWithWorkParams{
			Max: int32(min(want, e.cfg.ChunkSize)), Live: int32(max(live, 1)), Claimant: e.cfg.InstanceID, Now: now,
		})
		return err
	})
	return len(rows), err
}

// releaseSurplus gives back n claims over the fair share, those with no job running:
// the release judges that under the claim rows' locks (releaseIdle). It offers every claim
// held, the ones yielding already first (idle now, most likely), then those with no POST in
// progress, then the most recently claimed, and the first n it can lock are released or, when
// busy, yield (Yielding): no new job starts on them, so each is idle once its running job
// ends and a later cycle gives it back. A row another transaction has locked is passed over
// for the next: offered only the first n, an instance whose newest claims were locked by
// peers' acquisitions (which lock a row they read as free until their statement ends) gave
// none back for cycles on end while a fleet started. Without the yield, a claim whose
// service_id has a backlog always has a job in flight (each outcome chains the next), and an
// instance that joined under load would wait for the backlog to drain before it had any work.
func (e *Engine) releaseSurplus(ctx context.Context, held []db.ClaimsHeldRow, n int, rep *CycleReport) (int, error) {
	e.mu.Lock()
	yielding := func(id string) bool { h, ok := e.held[id]; return ok && h.yielding }
	picked := slices.Clone(held)
	slices.SortFunc(picked, func(a, b db.ClaimsHeldRow) int {
		if ya, yb := yielding(a.ServiceID), yielding(b.ServiceID); ya != yb {
			return boolOrder(ya)
		}
		if ia, ib := a.SubmittingSince == nil, b.SubmittingSince == nil; ia != ib {
			return boolOrder(ia)
		}
		return timeOf(b.ClaimedAt).Compare(timeOf(a.ClaimedAt))
	})
	e.mu.Unlock()
	offered := make([]Claim, len(picked))
	for i, h := range picked {
		offered[i] = Claim{ServiceID: h.ServiceID, Epoch: h.Epoch}
	}
	var locked []Claim
	var released int
	err := e.retried(ctx, rep, "release surplus", func(ctx context.Context) error {
		return runTx(ctx, e.db, pgx.TxOptions{}, e.GuardTx, func(tx pgx.Tx) (err error) {
			locked, released, err = e.releaseIdle(ctx, tx, offered, n)
			return err
		})
	})
	if err != nil {
		return 0, err
	}
	// The released claims leave e.held at the cycle's reconcile; the busy ones locked yield.
	e.yieldOnly(locked)
	if yielding := len(locked) - released; yielding > 0 {
		e.log.Info("released surplus claims over fair share; the busy ones yield: no new job starts on them, each is released once its running job ends",
			"released", released, "yielding", yielding)
	} else {
		e.log.Info("released surplus claims over fair share", "released", released)
	}
	return released, nil
}

// boolOrder orders true before false.
func boolOrder(first bool) int {
	if first {
		return -1
	}
	return 1
}

// yieldOnly makes the given claims, those still held with their epoch, the ones yielding.
func (e *Engine) yieldOnly(cs []Claim) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(cs) == 0 && e.yields.Load() == 0 {
		return // the common case: nothing yields, and held may be thousands of claims
	}
	for _, h := range e.held {
		h.yielding = false
	}
	n := int64(0)
	for _, c := range cs {
		if h, ok := e.held[c.ServiceID]; ok && h.claim.Epoch == c.Epoch && !h.yielding {
			h.yielding = true
			n++
		}
	}
	e.yields.Store(n)
}

// dropIdle deletes idle claim rows, a chunk at a time (up to dropChunksPerCycle chunks a
// cycle): this instance's own claims, or free rows (free), that have had no unfinished batch
// and no recorded activity for DropIdleAfter. Each chunk is a transaction of two statements:
// the first takes, without waiting, the enqueue lock of each candidate service_id (an enqueue
// running now keeps its row), the second, whose snapshot comes after those locks, deletes the
// rows that still have no unfinished batch. more says that the last chunk was full: there are
// probably more idle rows than one cycle drops.
func (e *Engine) dropIdle(ctx context.Context, now *time.Time, rep *CycleReport, free bool) (all []Claim, more bool, err error) {
	for range dropChunksPerCycle {
		chunk, full, err := e.dropIdleChunk(ctx, now, rep, free)
		all = append(all, chunk...)
		if err != nil || !full {
			return all, false, err
		}
	}
	return all, true, nil
}

// Each drop transaction takes one advisory lock per row, and Postgres keeps those in its
// shared lock table (max_locks_per_transaction x max_connections slots): a drop chunk stays
// small, and a cycle runs several.
const (
	dropChunk          = 200
	dropChunksPerCycle = 25
)

func (e *Engine) dropIdleChunk(ctx context.Context, now *time.Time, rep *CycleReport, free bool) (dropped []Claim, full bool, err error) {
	limit := min(e.cfg.ChunkSize, dropChunk)
	idleMs := e.cfg.DropIdleAfter.Milliseconds()
	err = e.retried(ctx, rep, "drop idle claims", func(ctx context.Context) error {
		dropped, full = dropped[:0], false
		return runTx(ctx, e.db, pgx.TxOptions{}, e.GuardTx, func(tx pgx.Tx) error {
			p := db.ClaimsDropIdleParams{}
			candidates := 0
			add := func(id string, epoch int64, locked bool) {
				candidates++
				if locked { // else an enqueue of it is running: it keeps its row
					p.ServiceIds, p.Epochs = append(p.ServiceIds, id), append(p.Epochs, epoch)
				}
			}
			if free {
				rows, err := e.q.ClaimsLockIdleFree(ctx, tx, db.ClaimsLockIdleFreeParams{Now: now, IdleMs: idleMs, Max: int32(limit)})
				if err != nil {
					return err
				}
				for _, r := range rows {
					add(r.ServiceID, r.Epoch, r.Locked)
				}
			} else {
				rows, err := e.q.ClaimsLockIdle(ctx, tx, db.ClaimsLockIdleParams{
					Claimant: e.cfg.InstanceID, Now: now, IdleMs: idleMs, Max: int32(limit),
				})
				if err != nil {
					return err
				}
				for _, r := range rows {
					add(r.ServiceID, r.Epoch, r.Locked)
				}
				p.Claimant = &e.cfg.InstanceID
			}
			full = candidates == limit
			if len(p.ServiceIds) == 0 {
				return nil
			}
			rows, err := e.q.ClaimsDropIdle(ctx, tx, p)
			for _, r := range rows {
				dropped = append(dropped, Claim{ServiceID: r.ServiceID, Epoch: r.Epoch})
			}
			return err
		})
	})
	if err != nil {
		return nil, false, err
	}
	if len(dropped) == 0 {
		return nil, full, nil
	}
	e.stats.dropped.Add(int64(len(dropped)))
	e.log.Debug("dropped idle claim rows", "rows", len(dropped), "free", free)
	if free {
		return dropped, full, nil
	}
	// Drop them here with their own reason, so that reconcile does not call them taken.
	e.mu.Lock()
	var lost []Claim
	for _, c := range dropped {
		if h, ok := e.held[c.ServiceID]; ok && h.claim.Epoch == c.Epoch {
			h.cancel()
			delete(e.held, c.ServiceID)
			lost = append(lost, h.claim)
		}
	}
	e.mu.Unlock()
	e.notifyLost(lost, LossDropped)
	return dropped, full, nil
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
	ctx, cancel := e.stmtCtx(ctx)
	defer cancel()
	now, err := e.clock.Now(ctx, e.db)
	if err == nil {
		var n int64
		n, err = e.q.InstancesPrune(ctx, e.db, db.InstancesPruneParams{Now: now, OlderThanMs: e.cfg.PruneAfter.Milliseconds()})
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
