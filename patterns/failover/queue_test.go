package failover_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batchclaim/batchclaim/patterns/failover"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
	"github.com/batchclaim/batchclaim/testkit/testutil"
)

// Commands pushed onto one node's queue are each consumed exactly once, even with two
// consumers on the same queue: woken by NOTIFY (polling set to a minute, so only a
// notification can wake them in time), by polling alone, and by the polling fallback when
// the notification never comes.
func TestCommandQueueDeliversExactlyOnce(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name          string
		disableListen bool
		poll          time.Duration
		notify        bool
	}{
		{"listen/notify", false, time.Minute, true},
		{"polling only", true, 100 * time.Millisecond, false},
		{"listening, notification lost", false, 300 * time.Millisecond, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			pool := dbtest.NewPool(t)
			var mu sync.Mutex
			seen := map[int64]int{}
			for range 2 {
				cfg := testConfig("q", "x", 1)
				cfg.DisableListen, cfg.PollInterval = c.disableListen, c.poll
				cfg.OnCommand = func(cmd failover.Command) { mu.Lock(); seen[cmd.ID]++; mu.Unlock() }
				runNode(t, newNode(t, dbtest.Open(t, pool, ""), cfg))
			}
			if !c.disableListen {
				testutil.WaitFor(t, 30*time.Second, "both consumers listening", func() bool {
					return scalar[int64](t, pool, `SELECT count(*) FROM pg_stat_activity
						WHERE datname = current_database() AND query = 'LISTEN "failover_commands"'`) == 2
				})
			}
			const total = 60
			for i := 1; i <= total; i++ {
				push(t, pool, "x", int64(i), c.notify)
			}
			testutil.WaitFor(t, 30*time.Second, "every command consumed", func() bool {
				return scalar[int64](t, pool, `SELECT count(*) FROM batchclaim.failover_commands WHERE consumed_at IS NOT NULL`) == total
			})
			// OnCommand runs after the consuming transaction commits: the last ones may
			// still be on their way when the table says every command is consumed.
			testutil.WaitFor(t, 10*time.Second, "every command delivered to OnCommand", func() bool {
				mu.Lock()
				defer mu.Unlock()
				return len(seen) >= total
			})
			mu.Lock()
			defer mu.Unlock()
			if len(seen) != total {
				t.Fatalf("%d distinct commands delivered, want %d", len(seen), total)
			}
			for id, k := range seen {
				if k != 1 {
					t.Fatalf("command %d delivered %d times", id, k)
				}
			}
		})
	}
}

// push queues a REPLICAOF command for node at epoch, and notifies it if asked.
func push(t *testing.T, pool *pgxpool.Pool, node string, epoch int64, notify bool) {
	t.Helper()
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	if _, err := tx.Exec(ctx, `INSERT INTO batchclaim.failover_commands (node_id, shard, epoch, kind, primary_id, primary_address, issued_by)
		VALUES ($1, 'q', $2, 'replicaof', 'y', 'y:6379', 'test')`, node, epoch); err != nil {
		t.Fatal(err)
	}
	if notify {
		if _, err := tx.Exec(ctx, `SELECT pg_notify('failover_commands', $1)`, node); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(fmt.Errorf("push: %w", err))
	}
}
