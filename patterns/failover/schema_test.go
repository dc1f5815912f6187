package failover_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batchclaim/batchclaim/patterns/failover"
	"github.com/batchclaim/batchclaim/pgdb"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
	"github.com/batchclaim/batchclaim/testkit/testutil"
)

// A shard in a schema other than batchclaim: the database has no batchclaim schema at all,
// so the heartbeats, the command queue, the failover lock and the failover itself must all
// find their tables in the configured one.
func TestFailoverInSchema(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool, err := pgxpool.New(ctx, dbtest.NewDBInSchema(t, "pat"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	quick := func(node string, progress int64) failover.Config {
		c := testConfig("s", node, progress)
		c.HeartbeatInterval, c.PrimaryLease, c.Patience, c.PatienceJitter, c.LockTTL = 100*time.Millisecond, 300*time.Millisecond, 500*time.Millisecond, -1, time.Second
		c.Schema = "pat"
		return c
	}
	n1cfg := quick("n1", 10)
	n1cfg.Bootstrap = true
	n1 := newNode(t, pool, n1cfg)
	n2 := newNode(t, pool, quick("n2", 5))
	n1ctx, stopN1 := context.WithCancel(context.Background())
	var n1wg sync.WaitGroup
	n1wg.Go(func() { _ = n1.Run(n1ctx) })
	t.Cleanup(func() { stopN1(); n1wg.Wait() })
	runNode(t, n2)
	testutil.WaitFor(t, 10*time.Second, "n1 acting as primary, n2 its replica", func() bool {
		s1, s2 := n1.State(), n2.State()
		return s1.Acting && s1.Epoch == 1 && s2.Role == failover.RoleReplica && s2.PrimaryID == "n1"
	})
	stopN1()
	n1wg.Wait()
	testutil.WaitFor(t, 10*time.Second, "n2 promoted once n1 fell silent", func() bool {
		s := n2.State()
		return s.Acting && s.Epoch == 2
	})
	var a failover.Audit
	testutil.WaitFor(t, 10*time.Second, "the failover marked completed", func() bool {
		if a, err = failover.Check(ctx, pgdb.QuerierInSchema(pool, "pat"), "s", time.Second); err != nil {
			t.Fatal(err)
		}
		return a.Completed == 1
	})
	wantClean(t, a)
	if a.Decisions != 1 || a.Completed != 1 || a.Primary != "n2" || a.LockAcquisitions != 1 {
		t.Fatalf("audit in pat: %+v", a)
	}

	bad := quick("n3", 1)
	bad.Schema = "public"
	if _, err := failover.New(pool, bad); err == nil || !strings.Contains(err.Error(), `invalid failover config: schema "public"`) {
		t.Fatalf("New with Schema public: %v, want it refused", err)
	}
}
