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
		return c
	}
	n1cfg := quick("n1", 10)
	n1cfg.Bootstrap = true
	db := dbtest.Open(t, pool, "pat")
	n1 := newNode(t, db, n1cfg)
	n2 := newNode(t, db, quick("n2", 5))
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
		if a, err = failover.Check(ctx, db, "s", time.Second); err != nil {
			t.Fatal(err)
		}
		return a.Completed == 1
	})
	wantClean(t, a)
	if a.Decisions != 1 || a.Completed != 1 || a.Primary != "n2" || a.LockAcquisitions != 1 {
		t.Fatalf("audit in pat: %+v", a)
	}
	if ds, err := failover.Decisions(ctx, db, "s"); err != nil || len(ds) != 1 || ds[0].NewPrimary != "n2" || ds[0].Outcome != failover.DecisionCompleted {
		t.Fatalf("decisions in pat: %+v %v", ds, err)
	}
	if s, err := failover.Shard(ctx, db, "s"); err != nil || s.Epoch != 2 || s.PrimaryID != "n2" {
		t.Fatalf("shard in pat: %+v %v", s, err)
	}
	if regs, err := failover.Nodes(ctx, db, "s", time.Minute); err != nil || len(regs) == 0 || regs[len(regs)-1].NodeID != "n2" || regs[len(regs)-1].Role != failover.RolePrimary {
		t.Fatalf("nodes in pat: %+v %v, want n2 primary (and n1, unless deleted as the stale old primary)", regs, err)
	}

	if _, err := failover.New(pgdb.DB{}, quick("n3", 1)); err == nil || !strings.Contains(err.Error(), "failover: no database") {
		t.Fatalf("New with the zero DB: %v, want it refused", err)
	}
}
