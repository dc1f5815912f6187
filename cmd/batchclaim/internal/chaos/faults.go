package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/google/uuid"
)

// victim is an instance a fault took out, with what it held then, for the takeover check.
type victim struct {
	kind, name string
	id         uuid.UUID
	at         time.Time // database time the fault hit; zero: not judged
	wall       time.Time // this process's clock then
	held       []heldClaim
	e1, e2     time.Time // its lease as it stood at the end of the outage
	until      time.Time // database time the outage ended; zero: never (killed)
}

type heldClaim struct {
	service string
	epoch   int64
	busy    bool // a batch was in submission: the claim is kept until expiry-2
	work    bool // the service_id had an unfinished batch: its row cannot be dropped as idle
}

// lane injects faults of the given kinds one after another: first every kind once in a
// random order (even past the deadline, so that a short run still has every kind), then kinds
// at random until the deadline, with short random gaps.
func (r *run) lane(ctx context.Context, kinds []string, rng *rand.Rand, until time.Time) {
	order := slices.Clone(kinds)
	rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	for i := 0; (i < len(order) || time.Now().Before(until)) && ctx.Err() == nil; i++ {
		kind := kinds[rng.IntN(len(kinds))]
		if i < len(order) {
			kind = order[i]
		}
		host := indexOf(hostKinds, kind) >= 0
		if host {
			r.hostMu.Lock()
			r.settle(ctx, r.cfg.Expiry2+2*time.Second)
		}
		err := r.inject(ctx, kind, rng)
		if host {
			r.hostMu.Unlock()
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			r.problem("fault %s failed: %v", kind, err)
		}
		r.sleep(ctx, time.Duration(300+rng.IntN(1200))*time.Millisecond)
	}
}

func (r *run) sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// outage is how long a victim stays out for its claims to be judged: long enough for even
// a busy claim's bound (expiry-2 plus two renew intervals plus the allowance) to pass.
func (r *run) outage(rng *rand.Rand) time.Duration {
	c := r.cfg
	return c.Expiry2 + 2*c.Renew + c.Allowance + time.Duration(rng.IntN(1000))*time.Millisecond
}

// faults are the fault kinds, each with the function that injects one fault of it (given
// its kind, as kinds that share a function tell themselves apart by it). Which kinds a run
// injects, and in which lane, is the config's: Kinds, hostKinds, ledgerKinds.
var faults = map[string]func(r *run, ctx context.Context, kind string, rng *rand.Rand) error{
	KindSIGKILL:            (*run).sigkill,
	KindSIGSTOP:            (*run).sigstop,
	KindLinkCut:            (*run).linkDown,
	KindLinkBlackhole:      (*run).linkDown,
	KindLinkFreeze:         (*run).linkFreeze,
	KindLinkLatency:        (*run).linkLatency,
	KindTerminateBackend:   (*run).terminateBackends,
	KindClockSkew:          (*run).clockSkew,
	KindPostgresRestart:    (*run).postgresRestart,
	KindPostgresFailover:   (*run).postgresFailover,
	KindLedger429:          (*run).ledger429,
	KindLedger503:          (*run).ledger503,
	KindLedgerTimeout:      (*run).ledgerTimeout,
	KindLedgerDropResponse: (*run).ledgerDropResponse,
	KindLedgerHiddenIntake: (*run).ledgerHiddenIntake,
	KindLedgerRestart:      (*run).ledgerRestart,
	KindConcurrentEnqueue:  (*run).enqueueConcurrently,

	KindPatroniKillPostmaster: (*run).leaderFault,
	KindPatroniKillPatroni:    (*run).leaderFault,
	KindPatroniSwitchover:     (*run).leaderFault,
	KindPatroniFailover:       (*run).leaderFault,
	KindPatroniDCSCut:         (*run).leaderFault,
	KindEtcdRestart:           (*run).leaderFault,
}

// inject runs one fault to its end.
func (r *run) inject(ctx context.Context, kind string, rng *rand.Rand) error {
	f, ok := faults[kind]
	if !ok {
		return fmt.Errorf("unknown fault kind %q", kind)
	}
	return f(r, ctx, kind, rng)
}

// sigkill kills a running instance, starts it again after a moment, and waits out the
// outage.
func (r *run) sigkill(ctx context.Context, kind string, rng *rand.Rand) error {
	in := r.pickRunning(rng)
	if in == nil {
		return nil
	}
	v := r.hit(ctx, kind, in)
	in.kill()
	r.held(ctx, v)
	r.event(kind, "%s killed, holding %d claims", in.name, len(v.held))
	r.leaseEnd(ctx, v, false)
	r.sleep(ctx, time.Duration(1000+rng.IntN(2000))*time.Millisecond)
	if err := in.start(r); err != nil {
		return err
	}
	r.event(kind, "%s started in its place", in.name)
	r.sleep(ctx, time.Until(v.wall.Add(r.outage(rng))))
	return nil
}

// sigstop stops a running instance for an outage, then lets it go on.
func (r *run) sigstop(ctx context.Context, kind string, rng *rand.Rand) error {
	in := r.pickRunning(rng)
	if in == nil {
		return nil
	}
	d := r.outage(rng)
	v := r.hit(ctx, kind, in)
	in.signal(syscall.SIGSTOP, stateStopped)
	r.held(ctx, v)
	r.event(kind, "%s stopped for %.1fs, holding %d claims", in.name, d.Seconds(), len(v.held))
	r.sleep(ctx, d)
	r.leaseEnd(ctx, v, true)
	in.signal(syscall.SIGCONT, stateRunning)
	return nil
}

// linkDown cuts (KindLinkCut) or blackholes (KindLinkBlackhole) a running instance's
// database link for an outage, or a third of the time for a moment it must ride out.
func (r *run) linkDown(ctx context.Context, kind string, rng *rand.Rand) error {
	in := r.pickRunning(rng)
	if in == nil {
		return nil
	}
	d := r.outage(rng)
	if rng.IntN(3) == 0 { // a short one, that the instance must ride out
		d = time.Duration(100+rng.IntN(int(r.cfg.Expiry1/time.Millisecond/2))) * time.Millisecond
	}
	v := r.hit(ctx, kind, in)
	for _, p := range in.proxies {
		if kind == KindLinkCut {
			p.Cut()
		} else {
			p.Blackhole()
		}
	}
	r.held(ctx, v)
	r.event(kind, "%s's database link down for %.1fs, holding %d claims", in.name, d.Seconds(), len(v.held))
	r.sleep(ctx, d)
	r.leaseEnd(ctx, v, true)
	for _, p := range in.proxies {
		p.Restore()
	}
	return nil
}

// linkFreeze freezes every connection a running instance holds, while new ones pass: its
// lease loop redials and keeps the lease alive, so nobody may take its claims, and it must
// give the frozen connections up by itself and go on working.
func (r *run) linkFreeze(ctx context.Context, kind string, rng *rand.Rand) error {
	in := r.pickRunning(rng)
	if in == nil {
		return nil
	}
	d := r.cfg.Expiry2 + 2*r.cfg.Expiry1 + time.Duration(rng.IntN(2000))*time.Millisecond
	r.count(kind)
	id := in.lookupID(ctx, r.pool)
	start, err := r.outageStart(ctx)
	if err != nil {
		return err
	}
	for _, p := range in.proxies {
		p.Freeze()
	}
	r.event(kind, "%s's open database connections frozen for %.1fs (new ones pass)", in.name, d.Seconds())
	r.sleep(ctx, d)
	r.judgeStall(ctx, in, id, start, "its connections frozen")
	for _, p := range in.proxies {
		p.Restore()
	}
	return nil
}

// linkLatency delays a running instance's database link for a few seconds.
func (r *run) linkLatency(ctx context.Context, kind string, rng *rand.Rand) error {
	in := r.pickRunning(rng)
	if in == nil {
		return nil
	}
	lat := time.Duration(20+rng.IntN(230)) * time.Millisecond
	d := time.Duration(3000+rng.IntN(3000)) * time.Millisecond
	r.count(kind)
	for _, p := range in.proxies {
		p.SetLatency(lat)
	}
	r.event(kind, "%s's database link delayed %v each way for %.1fs", in.name, lat, d.Seconds())
	r.sleep(ctx, d)
	for _, p := range in.proxies {
		p.SetLatency(0)
	}
	return nil
}

// terminateBackends terminates the database backends of a running instance.
func (r *run) terminateBackends(ctx context.Context, kind string, rng *rand.Rand) error {
	in := r.pickRunning(rng)
	if in == nil {
		return nil
	}
	n, err := r.db.terminate(ctx, r.pool, in.name)
	if err != nil {
		return err
	}
	r.count(kind)
	r.event(kind, "%d backends of %s terminated", n, in.name)
	return nil
}

// clockSkew stops a running instance gracefully and starts one in its place with its wall
// clock minutes off the database's, for the rest of the run.
func (r *run) clockSkew(ctx context.Context, kind string, rng *rand.Rand) error {
	in := r.pickRunning(rng)
	if in == nil {
		return nil
	}
	skew := time.Duration(2+rng.IntN(9)) * time.Minute
	if rng.IntN(2) == 0 {
		skew = -skew
	}
	r.count(kind)
	old, _, _ := in.snapshot()
	in.stop(10 * time.Second) // gracefully: it gives its claims back
	in.setSkew(skew)
	if err := in.start(r); err != nil {
		return err
	}
	name, _, _ := in.snapshot()
	r.event(kind, "%s stopped; %s started in its place with its wall clock %v off the database's (for the rest of the run)", old, name, skew)
	r.sleep(ctx, time.Duration(2000+rng.IntN(3000))*time.Millisecond)
	return nil
}

// postgresRestart restarts the local cluster's primary.
func (r *run) postgresRestart(ctx context.Context, kind string, _ *rand.Rand) error {
	down, streaming, err := r.db.restart(ctx)
	if err != nil {
		return err
	}
	r.count(kind)
	r.event(kind, "primary restarted in %.1fs; standby streaming again after %.1fs", down.Seconds(), streaming.Seconds())
	return nil
}

// postgresFailover kills the local cluster's primary and promotes its standby.
func (r *run) postgresFailover(ctx context.Context, kind string, _ *rand.Rand) error {
	seen, down, total, err := r.db.failover(ctx)
	r.mu.Lock()
	r.beforeFailover = append(r.beforeFailover, seen...)
	r.mu.Unlock()
	if err != nil {
		return err
	}
	r.count(kind)
	kindOf := "synchronous"
	if r.db.async {
		kindOf = "asynchronous"
	}
	r.event(kind, "primary killed, standby promoted in %.1fs; new %s standby after %.1fs", down.Seconds(), kindOf, total.Seconds())
	return nil
}

// ledger429 makes the ledger answer the next POSTs 429.
func (r *run) ledger429(ctx context.Context, kind string, rng *rand.Rand) error {
	n := 5 + rng.IntN(25)
	r.sim.InjectStatus(http.StatusTooManyRequests, n)
	r.count(kind)
	r.event(kind, "next %d POSTs answer 429", n)
	r.sleep(ctx, time.Duration(1000+rng.IntN(2000))*time.Millisecond)
	return nil
}

// ledger503 makes the ledger answer the next POSTs 503 with one of its error codes.
func (r *run) ledger503(ctx context.Context, kind string, rng *rand.Rand) error {
	n, code := 3+rng.IntN(12), []int{15, 17, 18}[rng.IntN(3)]
	r.sim.InjectError(http.StatusServiceUnavailable, code, n)
	r.count(kind)
	r.event(kind, "next %d POSTs answer 503 (code %d)", n, code)
	r.sleep(ctx, time.Duration(1000+rng.IntN(2000))*time.Millisecond)
	return nil
}

// ledgerTimeout makes the ledger hold the next POSTs unanswered.
func (r *run) ledgerTimeout(ctx context.Context, kind string, rng *rand.Rand) error {
	n := 1 + rng.IntN(4)
	hold := time.Duration(500+rng.IntN(int(r.cfg.Expiry2/time.Millisecond))) * time.Millisecond
	r.sim.InjectTimeouts(n, hold)
	r.count(kind)
	r.event(kind, "next %d POSTs held unanswered for %.1fs", n, hold.Seconds())
	r.sleep(ctx, hold+time.Second)
	return nil
}

// ledgerDropResponse makes the ledger accept the next POSTs and lose their answers.
func (r *run) ledgerDropResponse(ctx context.Context, kind string, rng *rand.Rand) error {
	n := 1 + rng.IntN(5)
	r.sim.InjectDroppedResponses(n)
	r.count(kind)
	r.event(kind, "next %d accepted POSTs lose their answer", n)
	r.sleep(ctx, time.Duration(1000+rng.IntN(2000))*time.Millisecond)
	return nil
}

// ledgerHiddenIntake makes the ledger take batches but report them UNKNOWN for a moment
// nobody can foresee: the instances resubmit them as their answers of the ledger run out,
// just as the ledger's COMMITTED answer may arrive, so a poll's write races a mark in flight.
func (r *run) ledgerHiddenIntake(ctx context.Context, kind string, rng *rand.Rand) error {
	n := 5 + rng.IntN(16)
	r.sim.InjectHiddenIntake(n, 4*r.cfg.Renew+time.Second)
	r.count(kind)
	r.event(kind, "next %d accepted POSTs lose their answer and stay UNKNOWN for up to %v", n, 4*r.cfg.Renew+time.Second)
	r.sleep(ctx, time.Duration(1500+rng.IntN(2000))*time.Millisecond)
	return nil
}

// ledgerRestart restarts the ledger, which forgets every batch not yet committed.
func (r *run) ledgerRestart(ctx context.Context, kind string, rng *rand.Rand) error {
	r.sim.Restart()
	r.count(kind)
	r.event(kind, "ledger restarted: every batch not yet committed is forgotten")
	r.sleep(ctx, time.Duration(1000+rng.IntN(2000))*time.Millisecond)
	return nil
}

// enqueueConcurrently has clients enqueue at once (concurrentEnqueue).
func (r *run) enqueueConcurrently(ctx context.Context, kind string, rng *rand.Rand) error {
	r.count(kind)
	r.event(kind, "%s", r.concurrentEnqueue(ctx, rng))
	return nil
}

// pickRunning returns a random running instance, or nil.
func (r *run) pickRunning(rng *rand.Rand) *instance {
	var up []*instance
	for _, in := range r.instances {
		if _, state, _ := in.snapshot(); state == stateRunning {
			up = append(up, in)
		}
	}
	if len(up) == 0 {
		return nil
	}
	return up[rng.IntN(len(up))]
}

// hit records a victim: the database time, and the claims it holds, just before the fault.
func (r *run) hit(ctx context.Context, kind string, in *instance) *victim {
	r.count(kind)
	name, _, _ := in.snapshot()
	v := &victim{kind: kind, name: name, id: in.lookupID(ctx, r.pool), wall: time.Now()}
	qctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	var live *bool
	if err := r.pool.QueryRow(qctx, `SELECT now(), (SELECT expiry_1 > now() FROM batchclaim.instances WHERE id = $1)`, v.id).Scan(&v.at, &live); err != nil || live == nil || !*live {
		// Unknown, or its lease had already lapsed (after a Postgres fault, say): whatever it
		// held was orphaned before this fault, which is not the one to judge.
		v.at = time.Time{}
	}
	r.mu.Lock()
	r.victims = append(r.victims, v)
	r.mu.Unlock()
	return v
}

// heldSettle is how long after a fault the victim's claims are read: statements it had sent
// before the fault (a submission mark, say) land within it.
const heldSettle = 300 * time.Millisecond

// held records the claims the victim holds once the fault took hold, and which of them have a
// submission in flight (kept until expiry-2).
func (r *run) held(ctx context.Context, v *victim) {
	if v.id == uuid.Nil {
		return
	}
	r.sleep(ctx, heldSettle)
	qctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	rows, err := r.pool.Query(qctx, `SELECT e.service_id, e.epoch, e.busy,
		EXISTS (SELECT 1 FROM batchclaim.batches b WHERE b.service_id = e.service_id AND b.unfinished)
		FROM batchclaim.service_id_claims_effective e WHERE e.claimant = $1`, v.id)
	if err != nil {
		return
	}
	defer rows.Close()
	var held []heldClaim
	for rows.Next() {
		var h heldClaim
		if rows.Scan(&h.service, &h.epoch, &h.busy, &h.work) == nil {
			held = append(held, h)
		}
	}
	r.mu.Lock()
	v.held = held
	r.mu.Unlock()
}

// settle waits (up to limit) until every running instance is registered and its lease is
// in phase one, so that the next host fault hits a healthy fleet.
func (r *run) settle(ctx context.Context, limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	for ctx.Err() == nil {
		var ids []uuid.UUID
		missing := false
		for _, in := range r.instances {
			if _, state, _ := in.snapshot(); state != stateRunning {
				continue
			}
			id := in.lookupID(ctx, r.pool)
			if id == uuid.Nil {
				missing = true
			}
			ids = append(ids, id)
		}
		if !missing {
			qctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			var healthy int
			err := r.pool.QueryRow(qctx, `SELECT count(*) FROM batchclaim.instances WHERE id = ANY($1) AND expiry_1 > now()`, ids).Scan(&healthy)
			cancel()
			if err == nil && healthy == len(ids) {
				return true
			}
		}
		if time.Now().After(deadline) {
			return false
		}
		r.sleep(ctx, 100*time.Millisecond)
	}
	return false
}

// leaseEnd records the victim's lease as the outage leaves it and, when the outage ends now,
// the database time.
func (r *run) leaseEnd(ctx context.Context, v *victim, ends bool) {
	qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var now time.Time
	var e1, e2 *time.Time
	err := r.pool.QueryRow(qctx, `SELECT now(), (SELECT expiry_1 FROM batchclaim.instances WHERE id = $1), (SELECT expiry_2 FROM batchclaim.instances WHERE id = $1)`, v.id).Scan(&now, &e1, &e2)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil || e1 == nil || e2 == nil {
		v.at = time.Time{} // the lease is unknown: not judged
		return
	}
	v.e1, v.e2 = *e1, *e2
	if ends {
		v.until = now
	}
}

// outage is what judgeStall needs of the moment an outage began: the database's time and
// the service_ids halted then.
type outage struct {
	since  time.Time
	halted []string
}

// outageStart reads the database's time and its halted service_ids as an outage begins.
func (r *run) outageStart(ctx context.Context) (outage, error) {
	qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var o outage
	err := r.pool.QueryRow(qctx, `SELECT now(), COALESCE((SELECT array_agg(service_id) FROM batchclaim.service_halts), '{}')`).Scan(&o.since, &o.halted)
	return o, err
}

// judgeStall checks, as a freeze of an instance's connections (or a starvation of its pool)
// ends, that the instance went on working: if the head of a service_id it holds was waiting
// for it from T1 + D after the outage began (from), it must have written something (an
// attempt, a status) since then, by which time it has had to give its frozen connections up
// (a claim-cycle statement is abandoned after expiry-1, a fetch's after the local deadline)
// or, unable to work, its service_ids. A head waits for its holder when it was stored before
// from and due by then, and its service_id is not halted now and was not at the outage's
// start (a halted service_id's work waits for an operator, and a healthy instance writes
// nothing for it). why says what happened to the instance. A stall is reported with the heads
// that waited, and the instance's goroutines and metrics are saved beside its log while it
// still stalls.
func (r *run) judgeStall(ctx context.Context, in *instance, id uuid.UUID, start outage, why string) {
	if id == uuid.Nil {
		return
	}
	from := start.since.Add(r.cfg.Expiry1 + r.cfg.Expiry1*2/3)
	qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	heads, err := r.waitingHeads(qctx, id, from, start.halted)
	if err != nil || len(heads) == 0 {
		return // the database is unreachable (not judged), or nothing waited for the instance
	}
	var wrote bool
	err = r.pool.QueryRow(qctx, `SELECT EXISTS (SELECT 1 FROM batchclaim.batch_history h WHERE h.instance_id = $1 AND h.at >= $2)`, id, from).Scan(&wrote)
	if err != nil || wrote {
		return
	}
	name, _, _ := in.snapshot()
	saved := r.saveDiagnostics(ctx, in, "stalled-"+from.UTC().Format("150405.000"))
	r.mu.Lock()
	r.stalled = append(r.stalled, fmt.Sprintf("%s: %s, it held service_ids with unfinished work and wrote nothing after %s; heads waiting: %s; %s",
		name, why, from.Format(time.StampMilli), strings.Join(heads, ", "), saved))
	r.mu.Unlock()
}

// waitingHeads describes the head (first unfinished batch) of each service_id instance id
// holds that waited for it from from (see judgeStall): not halted now nor in halted, stored
// before from (or behind an older unfinished batch), and due by then.
func (r *run) waitingHeads(ctx context.Context, id uuid.UUID, from time.Time, halted []string) ([]string, error) {
	rows, err := r.pool.Query(ctx, `SELECT service_id, epoch, seq, state, attempts, claim_epoch, updated_at FROM (
		SELECT DISTINCT ON (b.service_id) b.service_id, c.epoch, b.seq, b.state, b.attempts, b.claim_epoch, b.updated_at,
		       b.next_attempt_at IS NULL OR b.next_attempt_at <= $2 AS due
		FROM batchclaim.service_id_claims c JOIN batchclaim.batches b ON b.service_id = c.service_id AND b.unfinished
		WHERE c.claimant = $1 AND NOT c.service_id = ANY($3)
		  AND NOT EXISTS (SELECT 1 FROM batchclaim.service_halts x WHERE x.service_id = c.service_id)
		  AND EXISTS (SELECT 1 FROM batchclaim.batches o WHERE o.service_id = c.service_id AND o.unfinished AND o.created_at < $2)
		ORDER BY b.service_id, b.pos) h
		WHERE due`, id, from, halted)
	if err != nil {
		return nil, err
	}
	var out []string
	for rows.Next() {
		var (
			svc, state    string
			epoch, seq    int64
			attempts      int32
			markedAtEpoch *int64
			updated       time.Time
		)
		if err := rows.Scan(&svc, &epoch, &seq, &state, &attempts, &markedAtEpoch, &updated); err != nil {
			return nil, err
		}
		marked := "-"
		if markedAtEpoch != nil {
			marked = strconv.FormatInt(*markedAtEpoch, 10)
		}
		out = append(out, fmt.Sprintf("%s@%d seq %d %s (attempts %d, epoch of its mark %s, updated %s)",
			svc, epoch, seq, state, attempts, marked, updated.Format(time.StampMilli)))
	}
	return out, rows.Err()
}
