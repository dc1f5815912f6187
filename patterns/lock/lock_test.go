package lock_test

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/patterns/lock"
	"github.com/batchclaim/batchclaim/pgdb"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
	"github.com/batchclaim/batchclaim/testkit/testutil"
)

func newLocker(t *testing.T, pool *pgxpool.Pool, ttl time.Duration) *lock.Locker {
	t.Helper()
	l, err := lock.New(dbtest.Open(t, pool, ""), lock.Config{TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func wantNotHeld(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, lock.ErrNotHeld) || !errors.Is(err, batchclaim.ErrClaimLost) {
		t.Fatalf("%s: got %v, want an error wrapping ErrNotHeld and ErrClaimLost", what, err)
	}
}

func TestLock(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewPool(t)

	t.Run("acquire, renew, release, acquire again", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		a, b := newLocker(t, pool, time.Minute), newLocker(t, pool, time.Minute)
		la, err := a.Acquire(ctx, "basic")
		if err != nil || la.Epoch != 1 || len(la.Token) != 32 || !la.ExpiresAt.After(la.AcquiredAt) {
			t.Fatalf("first acquire: %+v %v", la, err)
		}
		if _, err := b.Acquire(ctx, "basic"); !errors.Is(err, lock.ErrHeld) {
			t.Fatalf("second acquire while held: %v, want ErrHeld", err)
		}
		before := la.ExpiresAt
		if err := a.Renew(ctx, &la); err != nil || la.ExpiresAt.Before(before) {
			t.Fatalf("renew: %v, expires %s (was %s)", err, la.ExpiresAt, before)
		}
		if err := a.Release(ctx, la); err != nil {
			t.Fatalf("release: %v", err)
		}
		st, err := b.Get(ctx, "basic")
		if err != nil || st.Held || st.Epoch != 1 {
			t.Fatalf("state after release: %+v %v", st, err)
		}
		lb, err := b.Acquire(ctx, "basic")
		if err != nil || lb.Epoch != 2 || lb.Token == la.Token {
			t.Fatalf("acquire after release: %+v %v", lb, err)
		}
		// The first holder's token is old now: renewing or releasing with it changes nothing.
		wantNotHeld(t, "renew with an old token", a.Renew(ctx, &la))
		wantNotHeld(t, "release with an old token", a.Release(ctx, la))
		if st, _ := b.Get(ctx, "basic"); !st.Held || st.Epoch != 2 {
			t.Fatalf("after the old holder's attempts: %+v", st)
		}
		if _, err := b.Get(ctx, "never-taken"); !errors.Is(err, batchclaim.ErrNotFound) {
			t.Fatalf("get of a lock never taken: %v", err)
		}
	})

	t.Run("wrong token changes nothing", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		l := newLocker(t, pool, time.Minute)
		lease, err := l.Acquire(ctx, "token")
		if err != nil {
			t.Fatal(err)
		}
		forged := lease
		forged.Token = strings.Repeat("0", 32)
		wantNotHeld(t, "renew", l.Renew(ctx, &forged))
		wantNotHeld(t, "release", l.Release(ctx, forged))
		tx, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		wantNotHeld(t, "fence", l.Fence(ctx, tx, forged))
		_ = tx.Rollback(ctx)
		ran := false
		wantNotHeld(t, "fenced write", l.WriteFenced(ctx, forged, func(pgx.Tx) error { ran = true; return nil }))
		if ran {
			t.Fatal("WriteFenced ran its write under a forged lease")
		}
		if err := l.WriteFenced(ctx, lease, func(pgx.Tx) error { ran = true; return nil }); err != nil || !ran {
			t.Fatalf("WriteFenced under the lease: %v (ran: %v)", err, ran)
		}
		wrongEpoch := lease
		wrongEpoch.Epoch++
		wantNotHeld(t, "release with the right token and a wrong epoch", l.Release(ctx, wrongEpoch))
		if st, _ := l.Get(ctx, "token"); !st.Held || st.Epoch != 1 {
			t.Fatalf("lock changed by a wrong token: %+v", st)
		}
		if err := l.Renew(ctx, &lease); err != nil {
			t.Fatalf("the holder's own renewal: %v", err)
		}
	})

	t.Run("expiry judged by the database clock", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		a, later := newLocker(t, pool, time.Minute), newLocker(t, pool, time.Minute)
		la, err := a.Acquire(ctx, "expiry")
		if err != nil {
			t.Fatal(err)
		}
		later.ShiftDBTime(59 * time.Second)
		if _, err := later.Acquire(ctx, "expiry"); !errors.Is(err, lock.ErrHeld) {
			t.Fatalf("acquire 59s later: %v, want ErrHeld", err)
		}
		later.ShiftDBTime(61 * time.Second)
		lb, err := later.Acquire(ctx, "expiry")
		if err != nil || lb.Epoch != la.Epoch+1 {
			t.Fatalf("acquire 61s later: %+v %v", lb, err)
		}
		wantNotHeld(t, "renew by the expired holder", a.Renew(ctx, &la))
		wantNotHeld(t, "release by the expired holder", a.Release(ctx, la))
		if st, _ := later.Get(ctx, "expiry"); !st.Held || st.Epoch != lb.Epoch {
			t.Fatalf("new holder's lock after the old holder's attempts: %+v", st)
		}
	})

	t.Run("renewal after expiry is refused even if nobody took the lock", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		l, viewer := newLocker(t, pool, time.Minute), newLocker(t, pool, time.Minute)
		lease, err := l.Acquire(ctx, "overrun")
		if err != nil {
			t.Fatal(err)
		}
		l.ShiftDBTime(2 * time.Minute)
		wantNotHeld(t, "late renewal", l.Renew(ctx, &lease))
		if st, _ := l.Get(ctx, "overrun"); st.Held {
			t.Fatalf("held two minutes later: %+v", st)
		}
		err = l.Release(ctx, lease)
		wantNotHeld(t, "late release", err)
		if !strings.Contains(err.Error(), "had expired") {
			t.Fatalf("late release should say the lock had expired: %v", err)
		}
		if st, _ := viewer.Get(ctx, "overrun"); st.Held {
			t.Fatalf("late release left the lock held: %+v", st)
		}
	})

	t.Run("epochs strictly increase and are never reused", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		l := newLocker(t, pool, time.Minute)
		var epochs []int64
		for i := range 6 {
			l.ShiftDBTime(time.Duration(i) * 2 * time.Minute) // every other one is taken over after expiry
			lease, err := l.Acquire(ctx, "epochs")
			if err != nil {
				t.Fatal(err)
			}
			epochs = append(epochs, lease.Epoch)
			if i%2 == 0 {
				if err := l.Release(ctx, lease); err != nil {
					t.Fatal(err)
				}
			}
		}
		for i, e := range epochs {
			if e != int64(i+1) {
				t.Fatalf("epochs %v, want 1..6", epochs)
			}
		}
		h, err := l.History(ctx, "epochs")
		if err != nil || len(h) != 6 {
			t.Fatalf("history %+v %v", h, err)
		}
		for i, a := range h {
			if a.Epoch != int64(i+1) || (a.ReleasedAt != nil) != (i%2 == 0) {
				t.Fatalf("history[%d] = %+v", i, a)
			}
		}
	})

	t.Run("fence holds acquisitions off until the caller commits", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		holder, taker := newLocker(t, pool, time.Minute), newLocker(t, pool, time.Minute)
		lease, err := holder.Acquire(ctx, "fence")
		if err != nil {
			t.Fatal(err)
		}
		tx, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx) //nolint:errcheck
		if err := holder.Fence(ctx, tx, lease); err != nil {
			t.Fatal(err)
		}
		taker.ShiftDBTime(2 * time.Minute) // by its clock the lock has expired
		type result struct {
			lease lock.Lease
			err   error
		}
		done := make(chan result, 1)
		go func() {
			l, err := taker.Acquire(ctx, "fence")
			done <- result{l, err}
		}()
		// Wait until the takeover is blocked on the fenced row, then commit.
		testutil.WaitFor(t, 30*time.Second, "the takeover waiting on the row lock", func() bool {
			var n int
			err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
				WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&n)
			return err == nil && n > 0
		})
		select {
		case r := <-done:
			t.Fatalf("takeover finished while the fence's transaction was open: %+v", r)
		default:
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		r := <-done
		if r.err != nil || r.lease.Epoch != lease.Epoch+1 {
			t.Fatalf("takeover after commit: %+v", r)
		}
	})
}

func TestConfig(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		ttl  time.Duration
		want string
	}{
		{-time.Second, "must not be negative"},
		{5 * time.Millisecond, "at least 10ms"},
		{10500 * time.Microsecond, "whole number of milliseconds"},
	} {
		if _, err := lock.New(pgdb.DB{}, lock.Config{TTL: c.ttl}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ttl %s: %v, want %q", c.ttl, err, c.want)
		}
	}
	if l, err := lock.New(dbtest.NewOpen(t), lock.Config{}); err != nil || l.TTL() != lock.TTLDefault {
		t.Errorf("default: %v %v", l, err)
	}
	if _, err := lock.New(pgdb.DB{}, lock.Config{TTL: time.Second, Margin: time.Second}); err == nil || !strings.Contains(err.Error(), "margin") {
		t.Errorf("a margin as long as the ttl: %v, want an error naming the margin", err)
	}
}

// The local deadline keeps a margin (TTL/10 by default) before the database's expiry could
// come, for clock rates that differ: it is the TTL less the margin, counted from when the
// acquisition was sent.
func TestDeadlineKeepsAMargin(t *testing.T) {
	t.Parallel()
	l := newLocker(t, dbtest.NewPool(t), 10*time.Second)
	before := time.Now()
	lease, err := l.Acquire(t.Context(), "margin")
	if err != nil {
		t.Fatal(err)
	}
	after := time.Now()
	lo, hi := before.Add(9*time.Second), after.Add(9*time.Second)
	if d := lease.Deadline(); d.Before(lo) || d.After(hi) {
		t.Fatalf("deadline %s after the acquisition was sent, want the TTL less a tenth (9s)", d.Sub(before))
	}
}

// holderProc is a child process (this test binary) that holds a lock.
type holderProc struct {
	*testutil.Child
	epoch int64
	read  int // lines read by next
}

func startHolder(t *testing.T, url, name string, ttl time.Duration) *holderProc {
	t.Helper()
	h := &holderProc{Child: testutil.StartChild(t, testutil.ChildConfig{Name: "holder",
		Env: []string{fmt.Sprintf("%s=%s %s %s", childEnv, url, name, ttl)}, OwnStderr: true})}
	line := h.next(t, 30*time.Second)
	e, err := strconv.ParseInt(strings.TrimPrefix(line, "acquired "), 10, 64)
	if err != nil {
		t.Fatalf("holder: %q", line)
	}
	h.epoch = e
	return h
}

// next returns the holder's next line, failing t if none comes within.
func (h *holderProc) next(t *testing.T, within time.Duration) string {
	t.Helper()
	l, ok := h.Line(h.read, within)
	if !ok {
		t.Fatal("holder exited or said nothing")
	}
	h.read++
	return l
}

// acquireWithin polls Acquire until it succeeds.
func acquireWithin(t *testing.T, l *lock.Locker, name string, within time.Duration) lock.Lease {
	t.Helper()
	var lease lock.Lease
	testutil.WaitFor(t, within, "acquiring "+name, func() bool {
		var err error
		lease, err = l.Acquire(t.Context(), name)
		if err != nil && !errors.Is(err, lock.ErrHeld) {
			t.Fatal(err)
		}
		return err == nil
	})
	return lease
}

func TestHolderKilled(t *testing.T) {
	t.Parallel()
	url := dbtest.NewDB(t)
	pool, err := pgxpool.New(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	const ttl = 3 * time.Second
	h := startHolder(t, url, "killed", ttl)
	l := newLocker(t, pool, ttl)
	if _, err := l.Acquire(t.Context(), "killed"); !errors.Is(err, lock.ErrHeld) {
		t.Fatalf("acquire while the holder lives: %v", err)
	}
	if err := h.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// Nobody releases it: it frees itself when its TTL passes, and the next epoch is larger.
	lease := acquireWithin(t, l, "killed", 10*ttl)
	if lease.Epoch <= h.epoch {
		t.Fatalf("epoch after takeover %d, holder had %d", lease.Epoch, h.epoch)
	}
	hist, err := l.History(t.Context(), "killed")
	if err != nil || len(hist) != 2 || hist[0].ReleasedAt != nil {
		t.Fatalf("history %+v %v: the killed holder's acquisition was never released", hist, err)
	}
}

func TestHolderStoppedPastExpiry(t *testing.T) {
	t.Parallel()
	url := dbtest.NewDB(t)
	pool, err := pgxpool.New(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	const ttl = 2 * time.Second
	h := startHolder(t, url, "stopped", ttl)
	if err := h.Cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	l := newLocker(t, pool, ttl)
	lease := acquireWithin(t, l, "stopped", 10*ttl)
	if lease.Epoch != h.epoch+1 {
		t.Fatalf("epoch after takeover %d, holder had %d", lease.Epoch, h.epoch)
	}
	// The paused holder wakes up believing it holds the lock. Its next renewal is refused,
	// and its release with the old token frees nothing.
	if err := h.Cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if line := h.next(t, 30*time.Second); !strings.Contains(line, "lost:") || !strings.Contains(line, "lock not held") {
		t.Fatalf("holder after SIGCONT: %q", line)
	}
	if line := h.next(t, 30*time.Second); line != "release refused" {
		t.Fatalf("holder's release with its old token: %q", line)
	}
	if err := l.Renew(t.Context(), &lease); err != nil {
		t.Fatalf("the new holder lost its lock to the old one: %v", err)
	}
}
