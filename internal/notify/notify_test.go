package notify_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/batchclaim/batchclaim/internal/notify"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
	"github.com/batchclaim/batchclaim/testkit/testutil"
)

// Run hands notifications on, runs OnQuiet on a silent connection, and when its backend is
// terminated reports the loss, listens again and runs OnListen again (what was notified
// meanwhile went unheard), after which notifications arrive again.
func TestRunListensAgainAfterALostConnection(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.NewPool(t)
	var (
		mu       sync.Mutex
		got      []string
		listens  int
		quiets   int
		losses   int
		backends []uint32
	)
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- notify.Run(rctx, notify.Config{
			Dial: func(ctx context.Context) (*pgx.Conn, error) {
				c, err := pool.Acquire(ctx)
				if err != nil {
					return nil, err
				}
				conn := c.Hijack()
				mu.Lock()
				backends = append(backends, conn.PgConn().PID())
				mu.Unlock()
				return conn, nil
			},
			Channels: []string{"notify_test_a", "notify test b"}, // a name that needs quoting
			Quiet:    200 * time.Millisecond,
			OnListen: func() { mu.Lock(); listens++; mu.Unlock() },
			OnNotify: func(n *pgconn.Notification) { mu.Lock(); got = append(got, n.Channel+":"+n.Payload); mu.Unlock() },
			OnQuiet:  func() { mu.Lock(); quiets++; mu.Unlock() },
			OnLost:   func(error, time.Duration) { mu.Lock(); losses++; mu.Unlock() },
		})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	state := func() (int, int, int, []string) {
		mu.Lock()
		defer mu.Unlock()
		return listens, quiets, losses, append([]string(nil), got...)
	}
	// Notifications sent until one arrives: the first may go before the LISTEN.
	send := func(ch, payload string) {
		testutil.WaitFor(t, 10*time.Second, "the notification on "+ch, func() bool {
			if _, err := pool.Exec(ctx, "SELECT pg_notify($1, $2)", ch, payload); err != nil {
				t.Fatal(err)
			}
			_, _, _, g := state()
			for _, s := range g {
				if s == ch+":"+payload {
					return true
				}
			}
			return false
		})
	}
	send("notify_test_a", "1")
	send("notify test b", "2")
	testutil.WaitFor(t, 10*time.Second, "a quiet period", func() bool { _, q, _, _ := state(); return q > 0 })

	mu.Lock()
	pid := backends[len(backends)-1]
	mu.Unlock()
	if _, err := pool.Exec(ctx, "SELECT pg_terminate_backend($1)", pid); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, "listening again", func() bool { l, _, lost, _ := state(); return l >= 2 && lost >= 1 })
	send("notify_test_a", "3")
	if l, _, _, _ := state(); l != 2 {
		t.Errorf("listened %d times, want 2", l)
	}
}

func TestRunRefusesAnIncompleteConfig(t *testing.T) {
	t.Parallel()
	if err := notify.Run(t.Context(), notify.Config{Channels: []string{"x"}}); err == nil {
		t.Fatal("Run without Dial and OnNotify: no error")
	}
}
