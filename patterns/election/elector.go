package election

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sort"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batchclaim/batchclaim"
	dbq "github.com/batchclaim/batchclaim/internal/db"
	"github.com/batchclaim/batchclaim/internal/dbclock"
	"github.com/batchclaim/batchclaim/internal/lease"
	"github.com/batchclaim/batchclaim/pgdb"
)

// shutdownWait bounds how long Run waits, once its context ended, for OnElected callbacks to
// return before it resigns their terms. A term whose callback is still running is not
// resigned: it ends by the timeout instead, after this instance has stopped renewing.
const shutdownWait = 5 * time.Second

// Elector stands for its roles: it becomes primary of each role that has no live primary and
// keeps its terms alive. It is safe for concurrent use.
//
// New does no I/O; Run does the work until its context ends.
type Elector struct {
	cfg   Config
	db    pgdb.DB // its Pool gives the elector's own connection
	q     *dbq.Queries
	log   *slog.Logger
	id    uuid.UUID
	clock dbclock.Clock // the database clock as this elector's statements see it (ShiftDBTime)
	stats counters

	// Used only by the goroutine running Run (or Cycle).
	conn    *pgxpool.Conn
	connDB  pgdb.Beginner // conn in the DB's schema
	ensured bool

	// lease is the local deadline (send time of the last confirmed lease write + T - I) and
	// its watchdog; it has a lock of its own, taken after mu, never before.
	lease *lease.Deadline

	mu     sync.Mutex
	runCtx context.Context // parent of the terms' contexts
	held   map[string]*heldTerm
}

type heldTerm struct {
	term   Term
	cancel context.CancelFunc
	done   chan struct{} // closed when OnElected returned
}

// New checks cfg and returns an Elector on db, whose statements run in db's schema, with a
// random instance id. It does no I/O.
func New(db pgdb.DB, cfg Config) (*Elector, error) {
	cfg, err := cfg.Resolve()
	if err != nil {
		return nil, err
	}
	if err := db.Err(); err != nil {
		return nil, fmt.Errorf("election: %w", err)
	}
	cfg.Roles = append([]string(nil), cfg.Roles...)
	id := uuid.New()
	e := &Elector{
		cfg: cfg, db: db, q: dbq.New(), id: id,
		// Fence judges the term inside the caller's transaction, which may have begun long
		// before, by clock_timestamp(): a shifted time counts from the same reading.
		clock: dbclock.Clock{Reading: dbclock.Statement},
		log:   cfg.Logger.With("instance_id", id.String()),
		held:  map[string]*heldTerm{},
	}
	e.lease = lease.NewDeadline(cfg.Timeout-cfg.HeartbeatInterval, e.deadlinePassed)
	return e, nil
}

// InstanceID is this elector's id, as recorded in its terms.
func (e *Elector) InstanceID() uuid.UUID { return e.id }

// Name is this elector's human-readable name.
func (e *Elector) Name() string { return e.cfg.Name }

// Host is the host recorded in this elector's terms.
func (e *Elector) Host() string { return e.cfg.Host }

// Timings returns the heartbeat interval I and the timeout T in force.
func (e *Elector) Timings() (interval, timeout time.Duration) {
	return e.cfg.HeartbeatInterval, e.cfg.Timeout
}

// ShiftDBTime makes every statement of this elector judge time as the database's clock + d.
// It exists so that tests and drills can move the database's view of time instead of
// sleeping; production code never calls it.
func (e *Elector) ShiftDBTime(d time.Duration) { e.clock.Shift(d) }

// CheckPrimary reports whether this instance is primary of role now, by its own
// conservative view: it holds the term and its local deadline (T - I after it sent its last
// confirmed renewal) has not passed. That view ends strictly before the database lets anyone
// else be elected. For a write, use Fence, which also asks the database.
func (e *Elector) CheckPrimary(role string) (Term, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	h, ok := e.held[role]
	if !ok || !e.usableLocked() {
		return Term{}, false
	}
	return h.term, true
}

// Primaries returns the terms this instance holds now, sorted by role.
func (e *Elector) Primaries() []Term {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.usableLocked() {
		return nil
	}
	out := make([]Term, 0, len(e.held))
	for _, h := range e.held {
		out = append(out, h.term)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Role < out[j].Role })
	return out
}

// Fence makes tx conditional on t still being this instance's live term: it returns an error
// wrapping batchclaim.ErrClaimLost when CheckPrimary no longer gives t (its deadline passed, it
// stepped down, or a later term of the role began), or when the database says the term is
// over; otherwise it locks the role's term row FOR SHARE until tx ends, so that no new term can
// begin before tx commits. Call it first in every transaction whose writes only the primary
// may make (WriteFenced does), and keep such transactions short: a takeover waits for them.
// Fence also sets idle_in_transaction_session_timeout = I for the rest of tx, so that if this
// process is paused or cut off in the middle of it, the server ends the transaction and frees
// the row instead of holding every successor off for as long as the pause lasts. Fence's own
// statements in tx name the election's tables in the DB's schema; tx's other statements are
// the caller's. It has the shape of lock.Locker.Fence and claims.Engine.Fence.
func (e *Elector) Fence(ctx context.Context, tx pgdb.Querier, t Term) error {
	role := t.Role
	if cur, ok := e.CheckPrimary(role); !ok || cur.Epoch != t.Epoch || cur.InstanceID != t.InstanceID {
		e.stats.fenceRejected.Add(1)
		return fmt.Errorf("fence %s@%d: not this instance's live term: %w", role, t.Epoch, batchclaim.ErrClaimLost)
	}
	if _, err := tx.Exec(ctx, "SELECT set_config('idle_in_transaction_session_timeout', $1, true)", ms(e.cfg.HeartbeatInterval)); err != nil {
		return fmt.Errorf("fence %s: set transaction timeout: %w", role, err)
	}
	q := e.db.In(tx)
	now, err := e.clock.Now(ctx, q)
	if err != nil {
		return fmt.Errorf("fence %s: %w", role, err)
	}
	err = fenceTerm(ctx, q, t, now)
	if errors.Is(err, batchclaim.ErrClaimLost) {
		e.stats.fenceRejected.Add(1)
		e.stepDown(t, StepDownFenced)
	}
	return err
}

// WriteFenced runs fn in a transaction of the elector's DB (its statements run in the DB's
// schema) that Fence makes conditional on t (Fence runs first; fn does not run when t is
// over), so that fn's writes commit only while this instance is t's primary. The
// transaction's lock waits are bounded by I. It returns an error wrapping
// batchclaim.ErrClaimLost when t is over. It has the shape of lock.Locker.WriteFenced and
// claims.Engine.WriteFenced.
func (e *Elector) WriteFenced(ctx context.Context, t Term, fn func(pgx.Tx) error) error {
	return pgdb.InTx(ctx, e.db, pgx.TxOptions{}, func(tx pgx.Tx) error {
		if err := pgdb.GuardTx(ctx, tx, e.cfg.HeartbeatInterval, e.cfg.HeartbeatInterval); err != nil {
			return err
		}
		if err := e.Fence(ctx, tx, t); err != nil {
			return err
		}
		return fn(tx)
	})
}

// usableLocked is leaseUsable for a caller that holds mu and reads the terms with it.
func (e *Elector) usableLocked() bool { return e.lease.Live() }

// Run stands for the roles until ctx ends, one cycle every heartbeat interval (sooner when a
// primary's lease is about to expire). A failed cycle is logged and counted; the local
// deadline decides when failures mean stepping down. When ctx ends, every term's context is
// cancelled, and the terms whose OnElected returned (within a few seconds) are resigned so
// that others are elected at once. Run returns ctx's error.
func (e *Elector) Run(ctx context.Context) error {
	e.mu.Lock()
	if e.runCtx != nil {
		e.mu.Unlock()
		return errors.New("election: Run called twice")
	}
	e.runCtx = ctx
	e.mu.Unlock()
	defer e.shutdown(ctx)
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-timer.C:
		}
		wait, err := e.Cycle(ctx)
		if err != nil && ctx.Err() == nil {
			e.stats.cycleErrors.Add(1)
			e.log.Warn("election cycle failed", "error", err)
		}
		timer.Reset(wait)
	}
}

// Cycle runs one step of the election: join or renew the lease, reconcile the terms held
// with the database, then take the roles that have no live primary. It returns how long to
// wait before the next cycle. Run calls it; tests may call it directly instead of Run (never
// both).
func (e *Elector) Cycle(ctx context.Context) (time.Duration, error) {
	defer e.stats.cycles.Add(1)
	e.mu.Lock()
	if e.runCtx == nil {
		e.runCtx = ctx
	}
	e.mu.Unlock()
	wait := e.cfg.HeartbeatInterval
	conn, err := e.connection(ctx)
	if err != nil {
		return wait, err
	}
	if err := e.cycle(ctx, conn); err != nil {
		e.dropConnection(ctx)
		return wait, err
	}
	standby, err := e.campaign(ctx, conn)
	if err != nil {
		e.dropConnection(ctx)
		return wait, err
	}
	return min(wait, standby), nil
}

// cycle keeps the lease: a join when it is not believed live, else a renewal. It gives up
// after half the time from a renewal's send to the deadline (at least I), so that a renewal
// lost in a stalled connection leaves room for another try, on a new connection, before the
// deadline passes.
func (e *Elector) cycle(ctx context.Context, conn pgdb.Beginner) error {
	ctx, cancel := context.WithTimeout(ctx, max(e.cfg.HeartbeatInterval, (e.cfg.Timeout-e.cfg.HeartbeatInterval)/2))
	defer cancel()
	if !e.ensured {
		if err := e.q.ElectionTermsEnsure(ctx, conn, e.cfg.Roles); err != nil {
			return fmt.Errorf("ensure roles: %w", err)
		}
		e.ensured = true
	}
	now, err := e.clock.Now(ctx, conn)
	if err != nil {
		return fmt.Errorf("read database clock: %w", err)
	}
	// A deadline that passed while the process was paused is acted on before anything is
	// sent, whichever of this loop and the watchdog runs first on waking.
	if e.lease.Check() {
		sent := time.Now()
		rows, err := e.q.ElectionMemberRenew(ctx, conn, dbq.ElectionMemberRenewParams{
			InstanceID: e.id, TimeoutMs: e.cfg.Timeout.Milliseconds(), Now: now,
		})
		if err != nil {
			e.stats.renewFailures.Add(1)
			return fmt.Errorf("renew lease: %w", err)
		}
		if len(rows) > 0 {
			dbHeld := map[string]int64{}
			for _, r := range rows {
				if r.Role != nil && r.Epoch != nil {
					dbHeld[*r.Role] = *r.Epoch
				}
			}
			e.renewed(sent, dbHeld)
			return nil
		}
		e.leaseLost()
	}
	sent := time.Now()
	if _, err := e.q.ElectionMemberJoin(ctx, conn, dbq.ElectionMemberJoinParams{
		InstanceID: e.id, Name: e.cfg.Name, Host: e.cfg.Host, TimeoutMs: e.cfg.Timeout.Milliseconds(), Now: now,
	}); err != nil {
		return fmt.Errorf("join: %w", err)
	}
	e.lease.Start(sent)
	e.log.Debug("lease started")
	return nil
}

// campaign looks at the roles this instance does not hold and takes those without a live
// primary. It returns how soon the next look is due: the heartbeat interval, or just after
// the earliest expiry of another primary's lease.
func (e *Elector) campaign(ctx context.Context, conn pgdb.Beginner) (time.Duration, error) {
	wait := e.cfg.HeartbeatInterval
	if !e.leaseUsable() {
		return wait, nil
	}
	var wanted []string
	e.mu.Lock()
	for _, r := range e.cfg.Roles {
		if _, ok := e.held[r]; !ok {
			wanted = append(wanted, r)
		}
	}
	e.mu.Unlock()
	if len(wanted) == 0 {
		return wait, nil
	}
	ctx, cancel := context.WithTimeout(ctx, e.cfg.Timeout-e.cfg.HeartbeatInterval)
	defer cancel()
	now, err := e.clock.Now(ctx, conn)
	if err != nil {
		return wait, fmt.Errorf("read database clock: %w", err)
	}
	states, err := readTerms(ctx, conn, wanted, now)
	if err != nil {
		return wait, fmt.Errorf("read terms: %w", err)
	}
	var free []string
	for _, st := range states {
		switch {
		case !st.live:
			free = append(free, st.term.Role)
		case st.term.InstanceID != e.id:
			// Look again right after that lease would expire, not up to I later.
			wait = min(wait, st.expiresIn+wakeSlack)
		}
	}
	if len(free) == 0 {
		return wait, nil
	}
	won, raced, err := e.acquire(ctx, conn, free, now)
	if err != nil {
		return wait, err
	}
	if raced {
		// Another takeover (of another role held by the same dead primary, say) changed the
		// rows first. Look again at once with a fresh snapshot, rather than I later.
		wait = min(wait, wakeSlack+time.Duration(rand.Int64N(int64(4*wakeSlack))))
	}
	for _, w := range won {
		e.elected(Term{Role: w.Role, Epoch: w.Epoch, InstanceID: e.id, Name: e.cfg.Name, Host: e.cfg.Host})
	}
	return wait, nil
}

// wakeSlack is how long after another primary's lease expiry a standby looks again.
const wakeSlack = 10 * time.Millisecond

// acquire takes the free roles in one REPEATABLE READ transaction: evict the expired leases
// of their holders, then take the terms. A concurrent renewal of an evicted lease, or a
// concurrent takeover of the same role, makes it fail with SQLSTATE 40001: the race is lost
// and nothing changes, as in the source design's optimistic concurrency.
//
// raced reports a serialization failure or deadlock (the rows changed under the takeover),
// after which a new attempt is worth making at once; a lock timeout (a fenced transaction of
// the current primary holds the term row) is not, it is retried at the next cycle.
func (e *Elector) acquire(ctx context.Context, conn pgdb.Beginner, roles []string, now *time.Time) (won []dbq.ElectionTermsAcquireRow, raced bool, err error) {
	var begun, timeouts bool
	err = pgdb.InTx(ctx, conn, pgx.TxOptions{IsoLevel: pgx.RepeatableRead}, func(tx pgx.Tx) error {
		begun = true
		if err := pgdb.GuardTx(ctx, tx, e.cfg.HeartbeatInterval, e.cfg.HeartbeatInterval); err != nil {
			timeouts = true
			return err
		}
		_, err := e.q.ElectionMembersEvict(ctx, tx, dbq.ElectionMembersEvictParams{InstanceID: e.id, Roles: roles, Now: now})
		if err == nil {
			won, err = e.q.ElectionTermsAcquire(ctx, tx, dbq.ElectionTermsAcquireParams{InstanceID: e.id, Roles: roles, Now: now})
		}
		return err
	})
	switch {
	case !begun:
		return nil, false, fmt.Errorf("begin takeover: %w", err)
	case timeouts:
		return nil, false, fmt.Errorf("set takeover timeouts: %w", err)
	}
	if pgdb.Conflict(err) {
		e.stats.racesLost.Add(1)
		e.log.Debug("takeover raced with another change; nothing taken", "roles", roles, "error", err)
		return nil, !pgdb.LockTimeout(err), nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("take over %v: %w", roles, err)
	}
	return won, false, nil
}

func ms(d time.Duration) string { return fmt.Sprint(d.Milliseconds()) }

// connection returns the elector's own connection, taken from the pool once and kept, so
// that the heartbeat never waits behind the application's use of the pool; its statements
// run in the DB's schema.
func (e *Elector) connection(ctx context.Context) (pgdb.Beginner, error) {
	if e.conn != nil {
		return e.connDB, nil
	}
	actx, cancel := context.WithTimeout(ctx, e.cfg.Timeout-e.cfg.HeartbeatInterval)
	defer cancel()
	c, err := e.db.Pool().Acquire(actx)
	if err != nil {
		return nil, fmt.Errorf("acquire connection: %w", err)
	}
	e.conn, e.connDB = c, pgdb.InSchema(c.Conn(), e.db.Schema())
	return e.connDB, nil
}

// dropConnection closes the connection after a failed statement; the next cycle takes a new
// one (a cut link leaves nothing worth keeping).
func (e *Elector) dropConnection(ctx context.Context) {
	if e.conn == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	_ = e.conn.Conn().Close(ctx)
	e.conn.Release()
	e.conn, e.connDB = nil, nil
}
