package claims

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/internal/db"
	"github.com/batchclaim/batchclaim/pgdb"
)

// BeginSubmission marks c busy before a batch of it is posted: from now until EndSubmission
// the claim survives expiry_1 (it can only be taken past expiry_2). It is refused with
// batchclaim.ErrClaimLost when c is no longer held with its epoch, when the local deadline
// has passed, or when the database clock says this instance's lease left phase one. Run it in
// the same transaction as the batch's in-flight mark and commit before the POST.
func (e *Engine) BeginSubmission(ctx context.Context, q pgdb.Querier, c Claim) error {
	if _, ok := e.current(c); !ok {
		return fmt.Errorf("begin submission %s@%d: %w", c.ServiceID, c.Epoch, batchclaim.ErrClaimLost)
	}
	now, err := e.clock.Now(ctx, q)
	if err != nil {
		return fmt.Errorf("begin submission: %w", err)
	}
	_, err = e.q.ClaimBeginSubmission(ctx, q, db.ClaimBeginSubmissionParams{
		Now: now, ServiceID: c.ServiceID, Claimant: e.cfg.InstanceID, Epoch: c.Epoch, Nonce: e.nonce,
	})
	return e.fenceResult("begin submission", c, err)
}

// EndSubmission clears the busy mark once the submission's outcome is recorded.
func (e *Engine) EndSubmission(ctx context.Context, q pgdb.Querier, c Claim) error {
	n, err := e.q.ClaimEndSubmission(ctx, q, db.ClaimEndSubmissionParams{
		ServiceID: c.ServiceID, Claimant: e.cfg.InstanceID, Epoch: c.Epoch,
	})
	if err == nil && n == 0 {
		err = pgx.ErrNoRows
	}
	return e.fenceResult("end submission", c, err)
}

// Fence makes the caller's transaction conditional on c: it returns batchclaim.ErrClaimLost
// if c is no longer held with its epoch, and otherwise locks the claim row until the
// transaction ends, so that no takeover can commit in between. Call it first in every
// transaction that writes about c's service_id.
func (e *Engine) Fence(ctx context.Context, tx pgdb.Querier, c Claim) error {
	_, err := e.q.ClaimFence(ctx, tx, db.ClaimFenceParams{ServiceID: c.ServiceID, Claimant: e.cfg.InstanceID, Epoch: c.Epoch, Nonce: e.nonce})
	return e.fenceResult("fence", c, err)
}

func (e *Engine) fenceResult(op string, c Claim, err error) error {
	if pgdb.NoRows(err) {
		e.stats.staleWrites.Add(1)
		e.lose(c, LossFenced)
		return fmt.Errorf("%s %s@%d: %w", op, c.ServiceID, c.Epoch, batchclaim.ErrClaimLost)
	}
	if err != nil {
		return fmt.Errorf("%s %s: %w", op, c.ServiceID, err)
	}
	return nil
}

// current returns the held claim for c's service_id if it has c's epoch and may be used.
func (e *Engine) current(c Claim) (Claim, bool) {
	h, ok := e.Holds(c.ServiceID)
	if !ok || h.Epoch != c.Epoch {
		return Claim{}, false
	}
	return h, true
}

// GuardTx bounds, for the rest of the transaction on q, how long a statement waits for a lock
// (lock_timeout = R) and how long the server keeps the transaction open while the client is
// silent (idle_in_transaction_session_timeout = T1/5). The second matters when an instance
// is paused or cut off in the middle of a transaction: the server ends that transaction and
// frees its locks long before expiry_1, so the others are never blocked behind a stalled
// instance. Every transaction that writes claim or batch rows should call it first.
func (e *Engine) GuardTx(ctx context.Context, q pgdb.Querier) error {
	return pgdb.GuardTx(ctx, q, e.cfg.RenewInterval, max(e.cfg.Expiry1/5, 100*time.Millisecond))
}

// WriteTx runs fn in a READ COMMITTED transaction guarded by GuardTx, and runs it again
// (with jittered backoff, up to MaxSerializationRetries times, while ctx lasts) when it fails
// with a lock timeout, a deadlock or a serialization failure (SQLSTATE 55P03, 40P01, 40001):
// a fenced write that merely lost a race must not be given up, or a recorded outcome turns into
// an adoption. fn must be safe to run again: everything it did in a failed try is rolled back.
func (e *Engine) WriteTx(ctx context.Context, fn func(pgx.Tx) error) error {
	return retryTx(ctx, e.db, pgx.TxOptions{}, e.cfg.MaxSerializationRetries, e.GuardTx,
		func() { e.stats.writeRetries.Add(1) }, fn)
}

// boundedDeadlines is a pool connection whose deadlines lie at most bound ahead. pgx sets a
// deadline of its own only to give a connection up: when a statement's context ends, and when
// it closes a connection it gave up, where it then drains what the server may still send for
// up to 15 seconds, and the pool keeps the connection's place until that ends. On a link that
// froze, nothing comes and nothing resets, so every connection given up held a place of the
// pool for 15 seconds, and a pool whose every connection froze could not dial a new one for
// as long (the claim cycle failed every T1 meanwhile). Bounded, a place is free after bound.
// Deadlines are not otherwise used on these connections (statements are bounded by contexts),
// and the zero deadline (none) is passed on as it is.
type boundedDeadlines struct {
	net.Conn
	bound time.Duration
}

func (c boundedDeadlines) clamp(t time.Time) time.Time {
	if limit := time.Now().Add(c.bound); !t.IsZero() && t.After(limit) {
		return limit
	}
	return t
}

func (c boundedDeadlines) SetDeadline(t time.Time) error { return c.Conn.SetDeadline(c.clamp(t)) }
func (c boundedDeadlines) SetReadDeadline(t time.Time) error {
	return c.Conn.SetReadDeadline(c.clamp(t))
}
func (c boundedDeadlines) SetWriteDeadline(t time.Time) error {
	return c.Conn.SetWriteDeadline(c.clamp(t))
}

// PingTimeout is the bound ConfigurePool puts on a pool's liveness ping of an idle
// connection: T1/8, at least 100ms, so that one statement's budget (T1) covers several
// unresponsive idle connections before a working one.
func PingTimeout(t Timings) time.Duration { return max(t.Expiry1/8, 100*time.Millisecond) }

func ms(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }

// RegisterServiceIDs makes sure each service_id has a claim row, so that some instance will
// claim it. It is cheap to call for ids that exist, and may run in the caller's transaction
// (enqueue does this together with storing the batch).
func RegisterServiceIDs(ctx context.Context, q pgdb.Querier, ids ...string) error {
	if len(ids) == 0 {
		return nil
	}
	if _, err := db.New().ClaimsRegister(ctx, q, ids); err != nil {
		return fmt.Errorf("register service_ids: %w", err)
	}
	return nil
}

// Nonce is this process's random token on its registry row. Statements that write about
// claimed service_ids on their own (set-based writes fenced per row, as package observer's)
// match it together with the instance id, as Fence does.
func (e *Engine) Nonce() uuid.UUID { return e.nonce }

// Fenced tells the engine that a fenced write found c stale (not held with its epoch any
// more): it counts a rejected stale write and drops c, as Fence does when it fails.
func (e *Engine) Fenced(c Claim) {
	e.stats.staleWrites.Add(1)
	e.lose(c, LossFenced)
}

// DBNow is the time a statement of this engine judges by: nil (the database's now()) unless
// ShiftDBTime moved it. Statements that check the lease by the database clock take it as
// their optional now.
func (e *Engine) DBNow(ctx context.Context, q pgdb.Querier) (*time.Time, error) {
	return e.clock.Now(ctx, q)
}

// Retry runs fn, and again (with jittered backoff, up to MaxSerializationRetries times, while
// ctx lasts) when it fails with a lock timeout, a deadlock or a serialization failure
// (SQLSTATE 55P03, 40P01, 40001). fn is one statement, or anything else safe to run again.
func (e *Engine) Retry(ctx context.Context, fn func() error) error {
	return retry(ctx, e.cfg.MaxSerializationRetries, func() { e.stats.writeRetries.Add(1) }, fn)
}

// ConfigurePool sets, on every connection of a pool about to be created, the timeouts that
// keep one stalled client from holding the others up: lock_timeout = R (a statement waits at
// most one renew interval for a row lock, and is then retried) and
// idle_in_transaction_session_timeout = T1/5 (the server ends a transaction whose client went
// silent, paused or cut off, and frees its locks long before expiry_1). Set once per
// connection, they cost no statement per transaction.
//
// It also bounds, by PingTimeout (T1/8, at least 100ms), how long a connection that stopped
// answering (a link frozen by a middlebox, a primary gone without a reset, while new
// connections would pass) keeps its place in the pool: the liveness ping the pool sends
// before it hands out a connection that sat idle, and the wait for a connection given up to
// close (see boundedDeadlines). Unbounded, each ping used up a statement's whole budget and
// each connection given up held its place for 15 seconds, so that a claim cycle failed every
// T1 for as long. It registers the library's identifier type on each connection too
// (pgdb.ConfigureTypes). Call it with the timings in force (Config.Resolve, then Timings)
// before pgxpool.NewWithConfig.
func ConfigurePool(pc *pgxpool.Config, t Timings) {
	pgdb.ConfigureTypes(pc)
	pc.PingTimeout = PingTimeout(t)
	bound := PingTimeout(t)
	// Wrapped where it is dialled, under TLS, so that a TLS connection stays a *tls.Conn
	// (SCRAM's channel binding looks for one) and its deadlines reach the wrapper.
	dial := pc.ConnConfig.DialFunc
	if dial == nil {
		dial = (&net.Dialer{KeepAlive: 5 * time.Minute}).DialContext
	}
	pc.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return boundedDeadlines{Conn: c, bound: bound}, nil
	}
	if pc.ConnConfig.RuntimeParams == nil {
		pc.ConnConfig.RuntimeParams = map[string]string{}
	}
	pc.ConnConfig.RuntimeParams["lock_timeout"] = ms(t.RenewInterval)
	pc.ConnConfig.RuntimeParams["idle_in_transaction_session_timeout"] = ms(max(t.Expiry1/5, 100*time.Millisecond))
}
