package claims

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/batchclaim/batchclaim/internal/db"
	"github.com/batchclaim/batchclaim/internal/dbclock"
	"github.com/batchclaim/batchclaim/internal/lease"
	"github.com/batchclaim/batchclaim/pgdb"
)

// ErrInstanceIDInUse: another process registered the same instance id and its lease has not
// passed expiry_2, so it may still be working under its claims.
var ErrInstanceIDInUse = errors.New("instance id in use")

// Engine holds and keeps this instance's claims. It is safe for concurrent use.
//
// New does no I/O. Register inserts the instance row; Run (or repeated calls to Cycle) keeps
// the lease and the claims; Shutdown releases everything and removes the instance row.
type Engine struct {
	cfg   Config
	db    pgdb.DB
	q     *db.Queries
	log   *slog.Logger
	nonce uuid.UUID // random per Engine: only this process can use its instance row

	clock dbclock.Clock // the database clock as this engine's statements see it (ShiftDBTime)
	kick  chan struct{} // Kick: run a cycle soon

	stats counters
	guard guard // the failover guard (guard.go)

	// deadline is the local deadline D and its watchdog (internal/lease, as the patterns'
	// leases use it). Its life starts at Register and ends at the deadline, which fences the
	// instance (fence); a renewal that succeeds later starts a new life (renewed).
	deadline *lease.Deadline

	mu         sync.Mutex
	base       context.Context // parent of claim contexts; never cancelled by Run's ctx
	held       map[string]*heldClaim
	registered bool
	loop       *leaseLoop // the lease loop, while it runs (Run to Shutdown)
	overCycles int        // consecutive cycles with more claims than the fair share
	// counted is the number of service_ids the last survey that counted them read, -1 before
	// the first or after this engine dropped rows (survey and surveyCount in cycle.go).
	counted int64
	yields  atomic.Int64 // held claims yielding (a claim lost since may still count until the next yield or cycle); written under mu
	cycles  int
}

// queries are the engine's statements; they hold no state (New's db parameter hides the
// package's name).
var queries = db.New()

type heldClaim struct {
	claim  Claim
	cancel context.CancelFunc
	// yielding: the claim is surplus over the fair share and busy; no new work should start
	// on it, so that a later cycle can give it back once its running job ends (Yielding).
	yielding bool
}

// New checks cfg and returns an Engine working in db. It does no I/O.
func New(db pgdb.DB, cfg Config) (*Engine, error) {
	if err := db.Err(); err != nil {
		return nil, fmt.Errorf("claims: %w", err)
	}
	cfg, err := cfg.Resolve()
	if err != nil {
		return nil, fmt.Errorf("claims: %w", err)
	}
	e := &Engine{
		cfg:     cfg,
		db:      db,
		q:       queries,
		log:     cfg.Logger.With("instance_id", cfg.InstanceID.String()),
		nonce:   uuid.New(),
		held:    map[string]*heldClaim{},
		counted: -1,
		kick:    make(chan struct{}, 1),
	}
	e.deadline = lease.NewDeadline(cfg.LocalDeadline, e.fence)
	return e, nil
}

// InstanceID is this instance's id in the instances table.
func (e *Engine) InstanceID() uuid.UUID { return e.cfg.InstanceID }

// Name is this instance's human-readable name.
func (e *Engine) Name() string { return e.cfg.Name }

// Timings returns the timing knobs in force.
func (e *Engine) Timings() Timings { return e.cfg.Timings() }

// ShiftDBTime makes every statement of this engine judge time as the database's now() + d.
// It exists so that tests and drills can move the database's view of time instead of
// sleeping; production code never calls it.
func (e *Engine) ShiftDBTime(d time.Duration) { e.clock.Shift(d) }

// Register inserts this instance into the registry and starts its lease. It must succeed
// before Cycle.
//
// The row is this process's alone (a random nonce, checked by renewal and every fence). If
// another process registered the same InstanceID and its lease has not passed expiry_2,
// Register fails with ErrInstanceIDInUse: that process may still be working under its claims.
// A row whose lease passed expiry_2 belongs to a dead process: its claims are voided and the
// row is replaced.
func (e *Engine) Register(ctx context.Context) error {
	sent := time.Now()
	err := serializable(ctx, e.db, e.cfg.MaxSerializationRetries, e.GuardTx, func() {},
		func(tx pgx.Tx) error { return e.registerTx(ctx, tx) })
	if isUniqueViolation(err) {
		err = fmt.Errorf("%w: %s was registered by another process at the same moment", ErrInstanceIDInUse, e.cfg.InstanceID)
	}
	if err != nil {
		return fmt.Errorf("register instance: %w", err)
	}
	e.mu.Lock()
	if e.base == nil {
		e.base = context.WithoutCancel(ctx)
	}
	e.registered = true
	e.mu.Unlock()
	e.deadline.Start(sent)
	e.log.Info("instance registered", "name", e.cfg.Name)
	return nil
}

func (e *Engine) registerTx(ctx context.Context, tx pgx.Tx) error {
	now, err := e.clock.Now(ctx, tx)
	if err != nil {
		return err
	}
	old, err := e.q.InstanceLockForRegister(ctx, tx, db.InstanceLockForRegisterParams{ID: e.cfg.InstanceID, Now: now})
	switch {
	case pgdb.NoRows(err):
	case err != nil:
		return err
	case old.Nonce == e.nonce:
		// Our own row (Register called again): renewing it is all there is to do.
		_, err := e.q.InstanceHeartbeat(ctx, tx, db.InstanceHeartbeatParams{
			ID: e.cfg.InstanceID, Nonce: e.nonce, Now: now,
			Expiry1Ms: e.cfg.Expiry1.Milliseconds(), Expiry2Ms: e.cfg.Expiry2.Milliseconds(),
		})
		return err
	case old.Live:
		return fmt.Errorf("%w: %s is held by another live process (its lease lasts until %s by the database clock); give each process its own id, or wait",
			ErrInstanceIDInUse, e.cfg.InstanceID, old.Expiry2.Format(time.RFC3339))
	default:
		voided, err := e.q.ClaimsVoidOwner(ctx, tx, e.cfg.InstanceID)
		if err != nil {
			return err
		}
		if _, err := e.q.InstanceDeleteDead(ctx, tx, db.InstanceDeleteDeadParams{ID: e.cfg.InstanceID, Nonce: old.Nonce}); err != nil {
			return err
		}
		e.log.Warn("replaced the registry row of a dead process with the same instance id", "voided_claims", len(voided))
	}
	_, err = e.q.InstanceRegister(ctx, tx, db.InstanceRegisterParams{
		ID: e.cfg.InstanceID, Nonce: e.nonce, Name: e.cfg.Name, Host: e.cfg.Host, Version: e.cfg.Version,
		Now: now, Expiry1Ms: e.cfg.Expiry1.Milliseconds(), Expiry2Ms: e.cfg.Expiry2.Milliseconds(),
	})
	return err
}

// Run registers the instance (if needed), starts the lease loop (renewals every
// RenewInterval on a connection of its own) and runs the claim cycle every RenewInterval until
// ctx ends. A failed cycle is logged and counted; the local deadline decides when repeated
// failed renewals mean the claims are lost. Run returns ctx's error; it does not release the
// claims, and the lease loop goes on renewing so that work still running under them can end:
// call Shutdown (or ShutdownKeeping) once it has, which stops the lease loop.
func (e *Engine) Run(ctx context.Context) error {
	e.mu.Lock()
	registered := e.registered
	e.mu.Unlock()
	if !registered {
		if err := e.Register(ctx); err != nil {
			return err
		}
	}
	e.startLease()
	t := time.NewTicker(e.cfg.RenewInterval)
	defer t.Stop()
	early := kickPacer{gap: min(max(e.cfg.RenewInterval/10, 20*time.Millisecond), 250*time.Millisecond)}
	for {
		if _, err := e.Cycle(ctx); err != nil && ctx.Err() == nil {
			e.log.Warn("claim cycle failed", "error", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		case <-e.kick:
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(early.wait(time.Now())):
			}
		}
	}
}

// kickPacer spaces the cycles Run runs early on a Kick: at least gap apart (RenewInterval/10,
// at least 20ms and at most 250ms), so that a burst of new service_ids costs a few cycles, not
// one each. The gap runs from the last early cycle, not from the last cycle: a Kick just after
// a cycle on the ticker (claims another instance gave back at its own cycle, when instances
// that started together run their cycles at the same moments) runs a cycle at once, so the
// jobs of those claims wait for one cycle, not for the gap.
type kickPacer struct {
	gap  time.Duration
	last time.Time // when the last early cycle was due
}

// wait returns how long after now the early cycle a Kick asks for may run, and counts it run.
func (p *kickPacer) wait(now time.Time) time.Duration {
	d := max(p.last.Add(p.gap).Sub(now), 0)
	p.last = now.Add(d)
	return d
}

// Kick asks Run for a claim cycle soon rather than at the next RenewInterval: a service_id
// nobody holds has new work.
func (e *Engine) Kick() {
	select {
	case e.kick <- struct{}{}:
	default:
	}
}

// Held returns the claims this instance may work on now, sorted by service_id: none while its
// local deadline has passed.
func (e *Engine) Held() []Claim {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.usableLocked() {
		return nil
	}
	out := make([]Claim, 0, len(e.held))
	for _, h := range e.held {
		out = append(out, h.claim)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ServiceID < out[j].ServiceID })
	return out
}

// Holds returns the claim on serviceID if this instance may work on it now.
func (e *Engine) Holds(serviceID string) (Claim, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	h, ok := e.held[serviceID]
	if !ok || !e.usableLocked() {
		return Claim{}, false
	}
	return h.claim, true
}

// Yielding reports whether the claim on serviceID is being given back: it is surplus over
// this instance's fair share and was busy (a job of it in flight) when the claim cycle
// would have released it. The holder should start no new work on it (the queuer neither
// fetches its next batch nor chains one to it), so that it goes idle when the job running
// now ends and a later cycle releases it. The claim stays held and usable meanwhile: the
// running job's outcome is written under it as under any other. A cycle that ends within
// the fair share (a peer left) stops the yield.
func (e *Engine) Yielding(serviceID string) bool {
	if e.yields.Load() == 0 {
		return false // asked for every job: no lock while nothing yields
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	h, ok := e.held[serviceID]
	return ok && h.yielding
}

// Healthy reports whether the local deadline has not passed.
func (e *Engine) Healthy() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.registered && e.usableLocked()
}

// Deadline is the local (monotonic) deadline: the send time of the last successful renewal
// plus LocalDeadline.
func (e *Engine) Deadline() time.Time { return e.deadline.At() }

// usableLocked reports whether the claims may be worked on: the local deadline has not
// passed and the failover guard does not refuse. The lock order is e.mu, then the deadline's.
func (e *Engine) usableLocked() bool {
	return e.deadline.Live() && e.Refusal() == ""
}

// renewed records a successful renewal sent at sent: it moves the local deadline to sent + D.
// A renewal that succeeds after the instance fenced itself starts the deadline's next life
// (the instance row lives until expiry_2, so the claims the database still lists as this
// instance's are read again by the next cycle), unless its own deadline has passed already.
// It must be called without e.mu held: a renewal found past its deadline fences here.
func (e *Engine) renewed(sent time.Time) {
	if e.deadline.Confirm(sent) || !time.Now().Before(sent.Add(e.cfg.LocalDeadline)) {
		return
	}
	revived := !e.deadline.At().IsZero()
	e.deadline.Start(sent)
	if revived {
		e.log.Info("renewal succeeded again; claims will be re-read from the database")
	}
}

// fence runs when the local deadline passes without a renewal (the deadline's OnExpire):
// every claim's context is cancelled and the claims are treated as lost. A renewal that
// started the deadline's next life before fence got the engine's lock proves the lease alive
// past the old deadline, and fence then leaves the claims alone, so that a claim gained just
// after that renewal is not dropped for the old deadline.
func (e *Engine) fence() {
	e.mu.Lock()
	if !e.registered || e.deadline.Live() {
		e.mu.Unlock()
		return
	}
	lost := e.dropAllLocked()
	e.mu.Unlock()
	// The database still lists the dropped claims as this instance's until a survey says
	// otherwise (LastSurvey).
	if n := int64(len(lost)); n > e.stats.surveyHeld.Load() {
		e.stats.surveyHeld.Store(n)
	}
	e.stats.deadlineFences.Add(1)
	e.log.Error("local deadline passed without a renewal; fencing: no new submissions, in-flight ones cancelled",
		"claims", len(lost))
	e.notifyLost(lost, LossDeadline)
}

func (e *Engine) dropAllLocked() []Claim {
	lost := make([]Claim, 0, len(e.held))
	for id, h := range e.held {
		h.cancel()
		lost = append(lost, h.claim)
		delete(e.held, id)
	}
	return lost
}

// lose drops c from the held set if it is still held with c's epoch.
func (e *Engine) lose(c Claim, why LossReason) {
	e.mu.Lock()
	h, ok := e.held[c.ServiceID]
	if !ok || h.claim.Epoch != c.Epoch {
		e.mu.Unlock()
		return
	}
	h.cancel()
	delete(e.held, c.ServiceID)
	e.mu.Unlock()
	e.notifyLost([]Claim{c}, why)
}

func (e *Engine) notifyLost(lost []Claim, why LossReason) {
	e.stats.lost.Add(int64(len(lost)))
	for _, c := range lost {
		e.log.Info("claim lost", "service_id", c.ServiceID, "epoch", c.Epoch, "reason", string(why))
		if e.cfg.OnLost != nil {
			e.cfg.OnLost(c, why)
		}
	}
}

func (e *Engine) notifyGained(gained []Claim) {
	e.stats.gained.Add(int64(len(gained)))
	e.granted(gained)
	for _, c := range gained {
		e.log.Debug("claim gained", "service_id", c.ServiceID, "epoch", c.Epoch)
		if e.cfg.OnGained != nil {
			e.cfg.OnGained(c)
		}
	}
}

// ShutdownTimeout bounds Shutdown.
const ShutdownTimeout = 5 * time.Second

// Shutdown releases every claim still held (each only if its epoch still matches) and
// removes the instance from the registry, so that other instances take the claims on their
// next cycle. Call it after the work running under the claims has stopped. It uses ctx
// without its cancellation, bounded by a few seconds.
func (e *Engine) Shutdown(ctx context.Context) error { return e.ShutdownKeeping(ctx, nil) }

// ShutdownKeeping is Shutdown for an instance some of whose work under its claims may still
// be running (a submission that did not end when asked to): the claims of the service_ids in
// busy are not released but left to expire (after expiry_2, as they are marked in
// submission), and the instance row stays until then, so that no other instance starts on
// them while that work may still reach the ledger. Every claim is dropped locally.
func (e *Engine) ShutdownKeeping(ctx context.Context, busy []string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ShutdownTimeout)
	defer cancel()
	e.stopLease()
	e.deadline.Stop()
	// Release by owner, not by the claims known here: a claim-cycle statement this process
	// gave up on (its context ended) may still have run to completion on the server and
	// taken claims it never learnt of, and deregistering would free those without a trace in
	// claim_events. Releasing and deregistering run in one transaction that first locks the
	// registry row: an acquisition in our name needs a key-share lock on that row (the claim
	// row's foreign key), so one that committed before is released here, and one still
	// running waits and then fails on the deleted row.
	if busy == nil {
		busy = []string{}
	}
	released := 0
	err := runTx(ctx, e.db, pgx.TxOptions{}, e.GuardTx, func(tx pgx.Tx) error {
		released = 0
		if len(busy) == 0 {
			if _, err := e.q.InstanceLockForRegister(ctx, tx, db.InstanceLockForRegisterParams{ID: e.cfg.InstanceID}); err != nil && !pgdb.NoRows(err) {
				return fmt.Errorf("lock registry row: %w", err)
			}
		}
		rows, err := e.q.ClaimsReleaseOwned(ctx, tx, db.ClaimsReleaseOwnedParams{Claimant: e.cfg.InstanceID, Keep: busy, Nonce: e.nonce})
		if err != nil {
			return fmt.Errorf("release claims: %w", err)
		}
		released = len(rows)
		if len(busy) > 0 {
			return nil
		}
		if _, err := e.q.InstanceDeregister(ctx, tx, db.InstanceDeregisterParams{ID: e.cfg.InstanceID, Nonce: e.nonce}); err != nil {
			return fmt.Errorf("deregister instance: %w", err)
		}
		return nil
	})
	e.stats.released.Add(int64(released))
	e.mu.Lock()
	dropped := e.dropAllLocked() // every claim ends here, released or left to expire
	e.mu.Unlock()
	e.notifyLost(dropped, LossReleased)
	if err != nil {
		return err
	}
	if len(busy) > 0 {
		e.log.Warn("stopped with work still running: its claims are left to expire instead of being released",
			"released", released, "left_to_expire", len(busy))
		return nil
	}
	e.mu.Lock()
	e.registered = false
	e.mu.Unlock()
	e.log.Info("instance stopped; claims released", "released", released)
	return nil
}

// releaseIdle gives back up to n of the given claims, in the order given, each only if it is
// idle: in transaction tx it locks them first (ClaimsLockOwn, skipping rows another
// transaction has locked and taking the next ones given instead), so that busy is judged after
// the lock, then releases those with no job or POST running (ClaimsRelease with only_idle).
// It returns the claims it locked and how many of them it released; the others are busy.
func (e *Engine) releaseIdle(ctx context.Context, tx pgdb.Querier, claims []Claim, n int) (locked []Claim, released int, err error) {
	if len(claims) == 0 || n <= 0 {
		return nil, 0, nil
	}
	ids, epochs := make([]string, len(claims)), make([]int64, len(claims))
	for i, c := range claims {
		ids[i], epochs[i] = c.ServiceID, c.Epoch
	}
	rows, err := e.q.ClaimsLockOwn(ctx, tx, db.ClaimsLockOwnParams{Claimant: e.cfg.InstanceID, ServiceIds: ids, Epochs: epochs, Max: int32(n)})
	if err != nil || len(rows) == 0 {
		return nil, 0, err
	}
	ids, epochs = ids[:0], epochs[:0]
	for _, l := range rows {
		locked = append(locked, Claim{ServiceID: l.ServiceID, Epoch: l.Epoch})
		ids, epochs = append(ids, l.ServiceID), append(epochs, l.Epoch)
	}
	out, err := e.q.ClaimsRelease(ctx, tx, db.ClaimsReleaseParams{
		Claimant: e.cfg.InstanceID, Event: "surplus_released", OnlyIdle: true, ServiceIds: ids, Epochs: epochs,
	})
	if err != nil {
		return nil, 0, err
	}
	e.stats.released.Add(int64(len(out)))
	return locked, len(out), nil
}
