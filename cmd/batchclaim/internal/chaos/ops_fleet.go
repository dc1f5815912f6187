package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/batchclaim/batchclaim/dlt"
	"github.com/batchclaim/batchclaim/ingest"
)

// The operations that act on the instances (their flags, their link, their pool) hold
// r.hostMu, as the host lane does for each of its faults, so that a takeover is never
// judged while an operation restarts or slows the instances that should take over.

// slotsWithoutRetention are the slots whose processes run the default retention.
func (r *run) slotsWithoutRetention() []*instance {
	var out []*instance
	for _, in := range r.instances {
		in.mu.Lock()
		if !in.retention {
			out = append(out, in)
		}
		in.mu.Unlock()
	}
	return out
}

func (r *run) slotWithoutRetention() *instance {
	if s := r.slotsWithoutRetention(); len(s) > 0 {
		return s[0]
	}
	return nil
}

// retentionOn reports whether some slot runs retention with the short age.
func (r *run) retentionOn() bool { return len(r.slotsWithoutRetention()) < len(r.instances) }

// dropIdleAfter is the --drop-idle-after the instances start with: the run's, or the one
// drop_idle_on turned on.
func (r *run) dropIdleAfter() time.Duration {
	if r.cfg.DropIdleAfter > 0 {
		return r.cfg.DropIdleAfter
	}
	return time.Duration(r.dropIdle.Load())
}

// restart stops the slot's process gracefully (it releases its claims), changes the slot's
// flags with edit, starts a new process in its place and waits for it to register. It
// returns the old and the new name.
func (r *run) restart(ctx context.Context, in *instance, edit func()) (old, name string, err error) {
	old, _, _ = in.snapshot()
	in.stop(10 * time.Second)
	in.mu.Lock()
	edit()
	in.mu.Unlock()
	if err := in.start(r); err != nil {
		return old, "", err
	}
	name, _, _ = in.snapshot()
	r.settle(ctx, r.cfg.Expiry2)
	return old, name, nil
}

// opRetentionOn restarts one slot with the retention job on, deleting finished batches
// retentionAge after they finished, every retentionInterval, for the rest of the run. One
// instance at a time prunes (an advisory lock), so one slot is enough for the whole table.
func (r *run) opRetentionOn(ctx context.Context, rng *rand.Rand) OpRecord {
	rec := OpRecord{Kind: OpRetentionOn}
	slots := r.slotsWithoutRetention()
	if len(slots) == 0 {
		rec.Result = "every slot runs retention already"
		return rec
	}
	in := slots[rng.IntN(len(slots))]
	r.hostMu.Lock()
	defer r.hostMu.Unlock()
	r.settle(ctx, r.cfg.Expiry2+2*time.Second)
	rec.At, _ = r.dbNow(ctx)
	old, name, err := r.restart(ctx, in, func() { in.retention = true })
	rec.Instance = name
	if err != nil {
		rec.Result, rec.Err = old+" stopped, no process in its place", err.Error()
		return rec
	}
	rec.Result, rec.Acted = fmt.Sprintf("%s stopped; %s started in its place with --retention %v --retention-interval %v (for the rest of the run)",
		old, name, retentionAge, retentionInterval), true
	return rec
}

// opDropIdleOn restarts every slot, one after another, with --drop-idle-after
// dropIdleOpAfter, for the rest of the run: claim rows of service_ids without unfinished
// batches are deleted from then on, and created again by the next enqueue (or Retry).
func (r *run) opDropIdleOn(ctx context.Context) OpRecord {
	rec := OpRecord{Kind: OpDropIdleOn}
	if r.cfg.DropIdleAfter > 0 {
		rec.At, _ = r.dbNow(ctx)
		rec.Result, rec.Acted = fmt.Sprintf("on from the start: the run's instances drop idle claim rows after %v", r.cfg.DropIdleAfter), true
		return rec
	}
	if r.dropIdle.Load() > 0 {
		rec.Result = "on already"
		return rec
	}
	r.hostMu.Lock()
	defer r.hostMu.Unlock()
	r.settle(ctx, r.cfg.Expiry2+2*time.Second)
	var err error
	if rec.At, err = r.dbNow(ctx); err != nil {
		rec.Result, rec.Err = "no database time", err.Error()
		return rec
	}
	r.mu.Lock()
	r.dropIdleFrom = rec.At
	r.mu.Unlock()
	r.dropIdle.Store(int64(dropIdleOpAfter))
	var names []string
	for _, in := range r.instances {
		old, name, err := r.restart(ctx, in, func() {})
		if err != nil {
			rec.Result, rec.Err = fmt.Sprintf("%s stopped, no process in its place", old), err.Error()
			return rec
		}
		names = append(names, old+" -> "+name)
	}
	rec.End, _ = r.dbNow(ctx)
	rec.Result, rec.Acted = fmt.Sprintf("every slot restarted with --drop-idle-after %v (%v)", dropIdleOpAfter, names), true
	return rec
}

// opClockDrift makes the delay on one instance's database link grow at a steady rate to a
// peak and shrink back at the same rate: the database's clock, as that instance reads it
// (its renewals' answers, the now() its statements see), runs slow by the rate and then fast
// by it. An instance's own clocks cannot be made to run at another rate from outside (see
// docs/chaos.md); the database's clock is the one its claims are judged by.
func (r *run) opClockDrift(ctx context.Context, rng *rand.Rand) OpRecord {
	rec := OpRecord{Kind: OpClockDrift}
	r.hostMu.Lock()
	defer r.hostMu.Unlock()
	r.settle(ctx, r.cfg.Expiry2+2*time.Second)
	in := r.pickRunning(rng)
	if in == nil {
		rec.Result = "no instance running"
		return rec
	}
	rec.Instance, _, _ = in.snapshot()
	rate := 0.04 + 0.04*rng.Float64() // seconds of delay gained per second
	peak := time.Duration(120+rng.IntN(100)) * time.Millisecond
	ramp := time.Duration(float64(peak) / rate)
	rec.At, _ = r.dbNow(ctx)
	r.event(OpClockDrift, "%s's database link delay grows %.0f ms a second to %v, then shrinks back", rec.Instance, rate*1000, peak)
	start := time.Now()
	const step = 50 * time.Millisecond
	for el := time.Duration(0); el < 2*ramp && ctx.Err() == nil; el = time.Since(start) {
		lat := time.Duration(float64(min(el, 2*ramp-el)) * rate)
		for _, p := range in.proxies {
			p.SetLatency(lat)
		}
		r.sleep(ctx, step)
	}
	for _, p := range in.proxies {
		p.SetLatency(0)
	}
	rec.End, _ = r.dbNow(ctx)
	rec.Result, rec.Acted = fmt.Sprintf("%s's link delay grew %.0f ms a second to %v and shrank back over %.1fs: the database clock, as %s reads it, ran %.0f%% slow, then %.0f%% fast",
		rec.Instance, rate*1000, peak, (2*ramp).Seconds(), rec.Instance, rate*100, rate*100), true
	return rec
}

// opHeldEnqueue stores a batch for one of the operations' own service_ids in a transaction
// held open while the service_id's owner changes: the owner is restarted gracefully (it
// releases its claims) and the transaction commits once another instance holds the
// service_id. The service_id gets no other arrival, so unless the enqueue's commit wakes the
// new owner, the batch waits for nobody: `lost` at the end.
func (r *run) opHeldEnqueue(ctx context.Context, rng *rand.Rand) OpRecord {
	rec := OpRecord{Kind: OpHeldEnqueue}
	r.hostMu.Lock()
	defer r.hostMu.Unlock()
	r.settle(ctx, r.cfg.Expiry2+2*time.Second)
	svc := opService(rng.IntN(opServices))
	rec.Service = svc
	owner, err := r.ownedSoon(ctx, svc)
	if err != nil {
		rec.Result, rec.Err = svc+" has no owner", err.Error()
		return rec
	}
	var victim *instance
	for _, in := range r.instances {
		if in.lookupID(ctx, r.pool) == owner {
			victim = in
		}
	}
	if victim == nil {
		rec.Result = fmt.Sprintf("%s's owner %s is not one of the run's instances", svc, owner)
		return rec
	}
	n := r.numbers.take(svc)
	id, list := dlt.FakeBatch(svc, n)
	tx, err := r.pool.Begin(ctx)
	if err != nil {
		rec.Result, rec.Err = "no transaction", err.Error()
		return rec
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // no-op after commit
	st, err := ingest.Enqueue(ctx, tx, svc, id, list)
	if err == nil {
		err = tx.QueryRow(ctx, `SELECT now()`).Scan(&rec.At)
	}
	if err != nil {
		rec.Result, rec.Err = "not stored", err.Error()
		return rec
	}
	rec.Seq = st.Seq
	old, name, err := r.restart(ctx, victim, func() {})
	if err != nil {
		rec.Result, rec.Err = old+" stopped, no process in its place", err.Error()
		return rec
	}
	now, err := r.ownedSoon(ctx, svc)
	if err != nil {
		rec.Err = err.Error()
	}
	if err := tx.Commit(ctx); err != nil {
		rec.Result, rec.Err = "not committed", err.Error()
		return rec
	}
	r.noteStored(svc, n, stored{done: time.Now(), via: "a transaction held across an ownership change"})
	r.arrived.Add(1)
	waited := r.judgeWakeup(ctx, svc, st.Seq, now)
	rec.End, _ = r.dbNow(ctx)
	rec.Result, rec.Acted = fmt.Sprintf("seq %d of %s stored in a transaction held open while its owner %s stopped (%s in its place); committed with the service_id held by %s, handed out %.2fs later",
		st.Seq, svc, old, name, now, waited.Seconds()), true
	return rec
}

// judgeWakeup waits until the batch seq leaves NEW, up to expiry-1 plus the allowance after
// its commit: its service_id is held by a live instance, so the commit's wake-up must reach
// that holder. A batch still NEW then (with no unfinished batch of its service_id before it)
// is a slow wake-up. It returns how long the batch waited.
func (r *run) judgeWakeup(ctx context.Context, svc string, seq int64, holder uuid.UUID) time.Duration {
	start := time.Now()
	bound := r.cfg.Expiry1 + r.cfg.Allowance
	for time.Since(start) < bound && ctx.Err() == nil {
		var waiting bool
		qctx, cancel := context.WithTimeout(ctx, time.Second)
		err := r.pool.QueryRow(qctx, `SELECT b.state = 'NEW' AND NOT EXISTS (SELECT 1 FROM batchclaim.batches e
			WHERE e.service_id = b.service_id AND e.unfinished AND e.seq < b.seq) FROM batchclaim.batches b WHERE b.seq = $1`, seq).Scan(&waiting)
		cancel()
		if err == nil && !waiting {
			return time.Since(start)
		}
		r.sleep(ctx, 20*time.Millisecond)
	}
	if ctx.Err() == nil {
		r.mu.Lock()
		r.slowWakeups = append(r.slowWakeups, fmt.Sprintf("%s: seq %d, stored by a transaction that committed after the service_id passed to %s, was still NEW (nothing of its service_id before it) %v after its commit",
			svc, seq, holder, bound))
		r.mu.Unlock()
	}
	return time.Since(start)
}

// ownedSoon waits (up to expiry-2) until svc's claim row exists and is held, creating it
// with a batch due at once if there is none, and returns its holder.
func (r *run) ownedSoon(ctx context.Context, svc string) (uuid.UUID, error) {
	deadline := time.Now().Add(r.cfg.Expiry2)
	stored := false
	for {
		var holder *uuid.UUID
		qctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		err := r.pool.QueryRow(qctx, `SELECT claimant FROM batchclaim.service_id_claims WHERE service_id = $1`, svc).Scan(&holder)
		cancel()
		switch {
		case err == nil && holder != nil:
			return *holder, nil
		case errors.Is(err, pgx.ErrNoRows) && !stored:
			// The row was dropped as idle: a batch due now brings it back.
			if _, err := r.enqueueOp(ctx, svc, time.Time{}); err != nil {
				return uuid.Nil, err
			}
			stored = true
		case err != nil && !errors.Is(err, pgx.ErrNoRows):
			return uuid.Nil, err
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return uuid.Nil, fmt.Errorf("%s not held within %v", svc, r.cfg.Expiry2)
		}
		r.sleep(ctx, 50*time.Millisecond)
	}
}

// opClockRate restarts one slot with its clock running at changing rates for the rest of the
// run: at full speed, then slow, then fast, over and over (package wallclock's test hook; the
// lease's local deadline counts by it). A host whose clock runs slow believes its lease lives
// longer than the database does; down to a rate of D/T1 (2/3 with the default D) its local
// deadline still comes before the database's expiry-1, and the run shows that nothing else
// depends on the rate. Fast, it fences itself early: safe, and its claims come back.
func (r *run) opClockRate(ctx context.Context, rng *rand.Rand) OpRecord {
	rec := OpRecord{Kind: OpClockRate}
	in := r.slotWithoutRate()
	if in == nil {
		rec.Result = "every slot runs at a changed rate already"
		return rec
	}
	slow := 0.75 + 0.15*rng.Float64()
	fast := 1.1 + 0.2*rng.Float64()
	schedule := fmt.Sprintf("1:%ds,%.3f:%ds,%.3f:%ds", 5+rng.IntN(10), slow, 10+rng.IntN(10), fast, 10+rng.IntN(10))
	r.hostMu.Lock()
	defer r.hostMu.Unlock()
	r.settle(ctx, r.cfg.Expiry2+2*time.Second)
	rec.At, _ = r.dbNow(ctx)
	old, name, err := r.restart(ctx, in, func() { in.rate = schedule })
	rec.Instance = name
	if err != nil {
		rec.Result, rec.Err = old+" stopped, no process in its place", err.Error()
		return rec
	}
	r.event(OpClockRate, "%s stopped; %s started in its place with its clock running at rates %s (for the rest of the run)", old, name, schedule)
	rec.End, _ = r.dbNow(ctx)
	rec.Result, rec.Acted = fmt.Sprintf("%s stopped; %s started in its place with its clock at rates %s (rate:held), for the rest of the run", old, name, schedule), true
	return rec
}

// slotWithoutRate is a slot whose processes run at the real clock rate, or nil.
func (r *run) slotWithoutRate() *instance {
	for _, in := range r.instances {
		in.mu.Lock()
		free := in.rate == ""
		in.mu.Unlock()
		if free {
			return in
		}
	}
	return nil
}
