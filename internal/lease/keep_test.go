package lease_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batchclaim/batchclaim/internal/lease"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

const ttl = 600 * time.Millisecond // its quarter (a renewal's step) is well above a loaded machine's statement time

// holder is a lease row of the shape every user has: an owner and an expiry by the database
// clock, renewed only while the row is still the owner's and live.
type holder struct {
	pool  *pgxpool.Pool
	owner string
	ttl   time.Duration // what a renewal sets the expiry to; the package's ttl when zero
	n     atomic.Int32
}

func newLeaseRow(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool := dbtest.NewPool(t)
	_, err := pool.Exec(context.Background(), fmt.Sprintf(`CREATE TABLE test_lease (name text PRIMARY KEY, owner text NOT NULL, expires_at timestamptz NOT NULL);
		INSERT INTO test_lease VALUES ('l', 'a', now() + interval '%d milliseconds')`, ttl.Milliseconds()))
	if err != nil {
		t.Fatal(err)
	}
	return pool
}

func (h *holder) renew(ctx context.Context) (time.Time, bool, error) {
	sent := time.Now()
	d := h.ttl
	if d == 0 {
		d = ttl
	}
	tag, err := h.pool.Exec(ctx, `UPDATE test_lease SET expires_at = now() + $2::bigint * interval '1 millisecond'
		WHERE name = 'l' AND owner = $1 AND expires_at > now()`, h.owner, d.Milliseconds())
	if err != nil {
		return sent, false, err
	}
	if tag.RowsAffected() == 0 {
		return sent, true, errors.New("lease taken over")
	}
	h.n.Add(1)
	return sent, false, nil
}

func loop(sent time.Time, onExpire func()) lease.Loop {
	return lease.Loop{Every: ttl / 4, Step: ttl / 4, Window: ttl * 2 / 3, Sent: sent, OnExpire: onExpire}
}

// The renewals come every quarter of the package's TTL, but the lease itself is five times
// longer here: a pause of the test process (a loaded machine) must not end it, since what is
// tested is that Keep goes on renewing, not how long a stall it survives.
func TestKeepRenewsUntilCancelled(t *testing.T) {
	h := &holder{pool: newLeaseRow(t), owner: "a", ttl: 5 * ttl}
	ctx, cancel := context.WithTimeout(context.Background(), 4*ttl)
	defer cancel()
	var expired atomic.Bool
	l := loop(time.Now(), func() { expired.Store(true) })
	l.Window = h.ttl * 2 / 3
	if err := lease.Keep(ctx, l, h.renew); err != nil {
		t.Fatalf("Keep = %v, want nil when its context ends", err)
	}
	if expired.Load() || h.n.Load() < 8 {
		t.Fatalf("renewals %d, expired %v: want about one per quarter TTL and no expiry", h.n.Load(), expired.Load())
	}
}

func TestKeepStopsWhenTakenOver(t *testing.T) {
	pool := newLeaseRow(t)
	h := &holder{pool: pool, owner: "a"}
	go func() {
		time.Sleep(ttl)
		_, _ = pool.Exec(context.Background(), "UPDATE test_lease SET owner = 'b'")
	}()
	err := lease.Keep(context.Background(), loop(time.Now(), nil), h.renew)
	if err == nil || errors.Is(err, lease.ErrExpired) {
		t.Fatalf("Keep = %v, want the refused renewal's error", err)
	}
}

// A renewal that hangs (the row is locked by another transaction) cannot keep the lease: the
// watchdog cancels the work at the local deadline, and Keep returns then.
func TestKeepExpiresWhileRenewalHangs(t *testing.T) {
	ctx := context.Background()
	pool := newLeaseRow(t)
	h := &holder{pool: pool, owner: "a"}
	tx, err := pool.BeginTx(ctx, pgx.TxOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, "SELECT 1 FROM test_lease FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	sent := time.Now()
	work, stop := context.WithCancel(ctx)
	defer stop()
	err = lease.Keep(ctx, loop(sent, stop), h.renew)
	if !errors.Is(err, lease.ErrExpired) {
		t.Fatalf("Keep = %v, want ErrExpired", err)
	}
	if work.Err() == nil {
		t.Fatal("OnExpire had not cancelled the work when Keep returned")
	}
	window := ttl * 2 / 3
	if took := time.Since(sent); took < window || took > window+ttl { // a loaded machine runs the watchdog late, never early
		t.Fatalf("Keep returned %v after the send, want at the window %v", took, window)
	}
}

// A renewal that returns its error just after the deadline finds the lease ended by the
// watchdog, which may still be running OnExpire: Keep returns only once OnExpire has, as the
// watchdog's own path through Done does.
func TestKeepReturnsAfterTheWatchdogsOnExpire(t *testing.T) {
	t.Parallel()
	var cancelled atomic.Bool
	onExpire := func() {
		time.Sleep(200 * time.Millisecond) // cancelling the work takes a while
		cancelled.Store(true)
	}
	late := func(ctx context.Context) (time.Time, bool, error) {
		sent := time.Now()
		<-ctx.Done()                      // bounded by the deadline
		time.Sleep(20 * time.Millisecond) // and answers just after it: the watchdog went first
		return sent, false, errors.New("renewal timed out")
	}
	err := lease.Keep(t.Context(), lease.Loop{Every: 10 * time.Millisecond, Step: time.Minute, Window: 100 * time.Millisecond,
		Sent: time.Now(), OnExpire: onExpire}, late)
	if !errors.Is(err, lease.ErrExpired) {
		t.Fatalf("Keep = %v, want ErrExpired", err)
	}
	if !cancelled.Load() {
		t.Fatal("Keep returned while OnExpire was still running")
	}
}
