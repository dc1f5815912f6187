package failover_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batchclaim/batchclaim/patterns/failover"
	"github.com/batchclaim/batchclaim/pgdb"
)

// testConfig: timings small enough for tests, generous enough for a loaded machine.
func testConfig(shard, node string, progress int64) failover.Config {
	return failover.Config{
		Shard: shard, NodeID: node, Address: node + ":6379", LastTxnID: progress,
		HeartbeatInterval: 200 * time.Millisecond,
		PrimaryLease:      time.Second,
		Patience:          2 * time.Second,
		PatienceJitter:    time.Second,
		LockTTL:           3 * time.Second,
		ConfirmTimeout:    2 * time.Second,
		PollInterval:      250 * time.Millisecond,
	}
}

func newNode(t *testing.T, db pgdb.DB, cfg failover.Config) *failover.Node {
	t.Helper()
	n, err := failover.New(db, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// runNode runs n until the test ends.
func runNode(t *testing.T, n *failover.Node) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = n.Run(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })
}

func mustExec(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) {
	t.Helper()
	if _, err := pool.Exec(t.Context(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func scalar[T any](t *testing.T, pool *pgxpool.Pool, sql string, args ...any) T {
	t.Helper()
	var v T
	if err := pool.QueryRow(t.Context(), sql, args...).Scan(&v); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return v
}

func audit(t *testing.T, db pgdb.DB, shard string) failover.Audit {
	t.Helper()
	a, err := failover.Check(t.Context(), db, shard, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func wantClean(t *testing.T, a failover.Audit) {
	t.Helper()
	if a.Violations() != 0 {
		t.Fatalf("audit found violations: %+v", a)
	}
}
