package lock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"time"

	dbq "github.com/batchclaim/batchclaim/internal/db"
	"github.com/batchclaim/batchclaim/internal/dbclock"
	"github.com/batchclaim/batchclaim/internal/lease"
	"github.com/batchclaim/batchclaim/pgdb"
	"github.com/jackc/pgx/v5"
)

// Locker takes, renews and releases owner-token locks in the owner_locks table.
type Locker struct {
	db    pgdb.DB
	cfg   Config
	q     *dbq.Queries
	log   *slog.Logger
	clock dbclock.Clock // the database clock as this locker's statements see it (ShiftDBTime)
}

// New checks cfg and returns a Locker on db, whose statements run in db's schema. It does
// no I/O.
func New(db pgdb.DB, cfg Config) (*Locker, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if err := db.Err(); err != nil {
		return nil, fmt.Errorf("lock: %w", err)
	}
	return &Locker{db: db, cfg: cfg, q: dbq.New(), log: cfg.Logger}, nil
}

// TTL is the time to live of each acquisition and renewal.
func (l *Locker) TTL() time.Duration { return l.cfg.TTL }

// ShiftDBTime makes every statement of this Locker judge time as the database's now() + d.
// It exists so that tests and drills can move the database's view of time instead of
// sleeping; production code never calls it.
func (l *Locker) ShiftDBTime(d time.Duration) { l.clock.Shift(d) }

// Lease is one acquisition of a lock. Token is random and known only to the acquirer; Epoch
// is larger than that of every earlier acquisition of the same name and is never reused, so
// it can fence writes made under the lock (a resource remembers the highest epoch it saw and
// refuses lower ones).
type Lease struct {
	Name  string
	Token string
	Epoch int64
	// AcquiredAt and ExpiresAt are database times, for display: never compare them with the
	// local clock. Use Deadline for a local decision.
	AcquiredAt, ExpiresAt time.Time
	sent                  time.Time // when the acquisition or last renewal was sent (monotonic)
	deadline              time.Time
}

// Deadline is a conservative local (monotonic) deadline: the TTL less Config.Margin, counted
// from the moment the acquisition or last renewal was sent. The database's expiry is never
// earlier, even if the local clock runs somewhat slower than the database's.
func (s Lease) Deadline() time.Time { return s.deadline }

// Acquire takes the lock called name if it is free or its TTL has passed by the database
// clock, with a fresh random token and the next epoch. ErrHeld means another owner holds it.
func (l *Locker) Acquire(ctx context.Context, name string) (Lease, error) {
	if name == "" {
		return Lease{}, errors.New("acquire lock: empty name")
	}
	token, err := newToken()
	if err != nil {
		return Lease{}, fmt.Errorf("acquire lock %s: %w", name, err)
	}
	now, err := l.clock.Now(ctx, l.db)
	if err != nil {
		return Lease{}, fmt.Errorf("acquire lock %s: %w", name, err)
	}
	sent := time.Now()
	row, err := l.q.LockAcquire(ctx, l.db, dbq.LockAcquireParams{Now: now, Name: name, Token: token, TtlMs: l.cfg.TTL.Milliseconds()})
	if pgdb.NoRows(err) {
		return Lease{}, fmt.Errorf("acquire lock %s: %w", name, ErrHeld)
	}
	if err != nil {
		return Lease{}, fmt.Errorf("acquire lock %s: %w", name, err)
	}
	l.log.Debug("lock acquired", "lock", name, "epoch", row.Epoch)
	return Lease{Name: name, Token: token, Epoch: row.Epoch, AcquiredAt: row.AcquiredAt, ExpiresAt: row.ExpiresAt,
		sent: sent, deadline: sent.Add(l.window())}, nil
}

// Renew extends the lease by the TTL from now (database clock), only if the lock is still
// held with the lease's token and epoch and has not expired. Otherwise it changes nothing
// and returns an error wrapping ErrNotHeld.
func (l *Locker) Renew(ctx context.Context, s *Lease) error {
	now, err := l.clock.Now(ctx, l.db)
	if err != nil {
		return fmt.Errorf("renew lock %s: %w", s.Name, err)
	}
	sent := time.Now()
	exp, err := l.q.LockRenew(ctx, l.db, dbq.LockRenewParams{Now: now, Name: s.Name, Token: s.Token, Epoch: s.Epoch, TtlMs: l.cfg.TTL.Milliseconds()})
	if pgdb.NoRows(err) {
		return fmt.Errorf("renew lock %s epoch %d: %w", s.Name, s.Epoch, ErrNotHeld)
	}
	if err != nil {
		return fmt.Errorf("renew lock %s: %w", s.Name, err)
	}
	s.ExpiresAt, s.sent, s.deadline = exp, sent, sent.Add(l.window())
	return nil
}

// window is the length of a lease's local deadline: the TTL less the margin.
func (l *Locker) window() time.Duration { return l.cfg.TTL - l.cfg.Margin }

// Release frees the lock if it is still held with the lease's token and epoch. A wrong or
// old token changes nothing and returns an error wrapping ErrNotHeld. A lock that had
// expired but that nobody took since is freed, and the error (wrapping ErrNotHeld) says the
// holder had overrun its TTL.
func (l *Locker) Release(ctx context.Context, s Lease) error {
	now, err := l.clock.Now(ctx, l.db)
	if err != nil {
		return fmt.Errorf("release lock %s: %w", s.Name, err)
	}
	row, err := l.q.LockRelease(ctx, l.db, dbq.LockReleaseParams{Now: now, Name: s.Name, Token: s.Token, Epoch: s.Epoch})
	if pgdb.NoRows(err) {
		return fmt.Errorf("release lock %s epoch %d: %w", s.Name, s.Epoch, ErrNotHeld)
	}
	if err != nil {
		return fmt.Errorf("release lock %s: %w", s.Name, err)
	}
	if !row.StillValid {
		return fmt.Errorf("release lock %s epoch %d: had expired before release: %w", s.Name, s.Epoch, ErrNotHeld)
	}
	l.log.Debug("lock released", "lock", s.Name, "epoch", s.Epoch)
	return nil
}

// Fence checks, inside the caller's transaction tx, that the lease still holds the lock and
// has not expired, and locks the lock's row FOR SHARE so that no other acquisition can
// commit before tx ends. Writes made in tx after a successful Fence are made under the lock.
// It returns an error wrapping ErrNotHeld when the lease is no longer valid. Fence's own
// statement in tx names the lock's table in the DB's schema; tx's other statements are the
// caller's.
func (l *Locker) Fence(ctx context.Context, tx pgdb.Querier, s Lease) error {
	tx = l.db.In(tx)
	now, err := l.clock.Now(ctx, tx)
	if err != nil {
		return fmt.Errorf("fence lock %s: %w", s.Name, err)
	}
	_, err = l.q.LockFence(ctx, tx, dbq.LockFenceParams{Now: now, Name: s.Name, Token: s.Token, Epoch: s.Epoch})
	if pgdb.NoRows(err) {
		return fmt.Errorf("fence lock %s epoch %d: %w", s.Name, s.Epoch, ErrNotHeld)
	}
	if err != nil {
		return fmt.Errorf("fence lock %s: %w", s.Name, err)
	}
	return nil
}

// WriteFenced runs fn in a transaction that Fence makes conditional on s (Fence runs first;
// fn does not run when s no longer holds the lock), so that fn's writes commit only under the
// lock. The transaction's lock waits are bounded by a third of the TTL, and the server ends it
// if this process stalls in the middle of it for as long. It returns an error wrapping
// ErrNotHeld when s is no longer valid. The transaction is the DB's: its statements run in
// the DB's schema. It has the shape of election.Elector.WriteFenced and
// claims.Engine.WriteFenced.
func (l *Locker) WriteFenced(ctx context.Context, s Lease, fn func(pgx.Tx) error) error {
	return pgdb.InTx(ctx, l.db, pgx.TxOptions{}, func(tx pgx.Tx) error {
		if err := pgdb.GuardTx(ctx, tx, l.cfg.TTL/3, l.cfg.TTL/3); err != nil {
			return err
		}
		if err := l.Fence(ctx, tx, s); err != nil {
			return err
		}
		return fn(tx)
	})
}

// KeepAlive renews s every third of the TTL until ctx ends (it then returns nil) or the lock
// is lost: a renewal reports it (KeepAlive returns that error, wrapping ErrNotHeld), or the
// lease's local deadline passes without a successful renewal (an error wrapping ErrNotHeld
// that names the last renewal's failure). A renewal that fails for another reason is retried
// at the next tick. Each renewal is bounded by a third of the TTL and by the deadline, so
// KeepAlive returns at the deadline even while a renewal hangs: cancel the work the lock
// protects when it returns. The renewal loop is internal/lease's.
func (l *Locker) KeepAlive(ctx context.Context, s Lease) error {
	err := lease.Keep(ctx, lease.Loop{
		Every: l.cfg.TTL / 3, Step: l.cfg.TTL / 3, Window: l.window(), Sent: s.sent,
		OnError: func(err error) { l.log.Warn("lock renewal failed", "lock", s.Name, "epoch", s.Epoch, "error", err) },
	}, func(rctx context.Context) (time.Time, bool, error) {
		err := l.Renew(rctx, &s)
		return s.sent, errors.Is(err, ErrNotHeld), err
	})
	if errors.Is(err, lease.ErrExpired) {
		return fmt.Errorf("keep lock %s alive: %v: %w", s.Name, err, ErrNotHeld)
	}
	return err
}

// State is what anybody may read about a lock (never its token).
type State struct {
	Name  string
	Epoch int64
	// Held is true while an owner holds the lock and its TTL has not passed (database clock).
	Held                  bool
	AcquiredAt, ExpiresAt *time.Time
	// DBNow is the database time the state was judged at.
	DBNow time.Time
}

// Get returns the lock's state; batchclaim.ErrNotFound if it was never acquired.
func (l *Locker) Get(ctx context.Context, name string) (State, error) {
	now, err := l.clock.Now(ctx, l.db)
	if err != nil {
		return State{}, fmt.Errorf("get lock %s: %w", name, err)
	}
	row, err := l.q.LockGet(ctx, l.db, dbq.LockGetParams{Now: now, Name: name})
	if err != nil {
		return State{}, fmt.Errorf("get lock %s: %w", name, pgdb.NotFound(err))
	}
	return State{Name: row.Name, Epoch: row.Epoch, Held: row.Held, AcquiredAt: row.AcquiredAt, ExpiresAt: row.ExpiresAt, DBNow: row.DbNow}, nil
}

// Acquisition is one past acquisition of a lock.
type Acquisition struct {
	Epoch      int64
	AcquiredAt time.Time
	// ReleasedAt is nil when the holder never released it (it expired, or is still held).
	ReleasedAt *time.Time
}

// History returns every acquisition of the lock called name, oldest first.
func (l *Locker) History(ctx context.Context, name string) ([]Acquisition, error) {
	rows, err := l.q.LockAcquisitions(ctx, l.db, name)
	if err != nil {
		return nil, fmt.Errorf("lock history %s: %w", name, err)
	}
	out := make([]Acquisition, len(rows))
	for i, r := range rows {
		out[i] = Acquisition{Epoch: r.Epoch, AcquiredAt: r.AcquiredAt, ReleasedAt: r.ReleasedAt}
	}
	return out, nil
}

// newToken returns 128 random bits from crypto/rand, hex encoded.
func newToken() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("random token: %w", err)
	}
	return hex.EncodeToString(b), nil
}
