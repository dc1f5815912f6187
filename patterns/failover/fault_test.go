package failover_test

import (
	"encoding/json"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batchclaim/batchclaim/testkit/dbtest"
	"github.com/batchclaim/batchclaim/testkit/testutil"
)

// nodeProc is one node of a shard running as its own process (this test binary).
type nodeProc struct {
	*testutil.Child
	id string
}

func startNode(t *testing.T, s childSpec) *nodeProc {
	t.Helper()
	spec, _ := json.Marshal(s)
	return &nodeProc{id: s.NodeID,
		Child: testutil.StartChild(t, testutil.ChildConfig{Name: "node " + s.NodeID, Env: []string{childEnv + "=" + string(spec)}})}
}

// faultShard starts a primary p (progress 1000) and replicas a (900), b (950) and, if
// withC, c (920) as processes, and waits until every replica follows p. b, the best
// candidate, is the most patient, so that a failover is orchestrated by a or c and hands over
// to another node.
func faultShard(t *testing.T, stallAt int64, withC bool) (*pgxpool.Pool, map[string]*nodeProc) {
	t.Helper()
	url := dbtest.NewDB(t)
	pool, err := pgxpool.New(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	procs := map[string]*nodeProc{}
	for _, s := range []struct {
		id       string
		progress int64
	}{{"p", 1000}, {"a", 900}, {"b", 950}, {"c", 920}} {
		if s.id == "c" && !withC {
			continue
		}
		procs[s.id] = startNode(t, childSpec{URL: url, Shard: "f", NodeID: s.id, Progress: s.progress, Bootstrap: s.id == "p", StallAtEpoch: stallAt, Patience: patience(s.id)})
	}
	testutil.WaitFor(t, 60*time.Second, "the shard formed around p", func() bool {
		return scalar[int64](t, pool, `SELECT count(*) FROM batchclaim.failover_nodes WHERE epoch = 1 AND primary_id = 'p'`) == int64(len(procs))
	})
	return pool, procs
}

// decided waits for a completed decision at epoch >= minEpoch and returns its new primary.
func completed(t *testing.T, pool *pgxpool.Pool, minEpoch int64) (epoch int64, primary, by string) {
	t.Helper()
	testutil.WaitFor(t, 60*time.Second, fmt.Sprintf("a completed failover to epoch %d or later", minEpoch), func() bool {
		return scalar[int64](t, pool, `SELECT count(*) FROM batchclaim.failover_decisions WHERE outcome = 'completed' AND epoch >= $1`, minEpoch) > 0
	})
	err := pool.QueryRow(t.Context(), `SELECT epoch, new_primary, completed_by FROM batchclaim.failover_decisions
		WHERE outcome = 'completed' ORDER BY epoch DESC LIMIT 1`).Scan(&epoch, &primary, &by)
	if err != nil {
		t.Fatal(err)
	}
	return epoch, primary, by
}

// settled waits until every node in ids has registered the shard's current epoch and
// primary with the right role.
func settled(t *testing.T, pool *pgxpool.Pool, ids ...string) {
	t.Helper()
	testutil.WaitFor(t, 60*time.Second, fmt.Sprintf("%v to follow the shard's decision", ids), func() bool {
		return scalar[int64](t, pool, `SELECT count(*) FROM batchclaim.failover_nodes n JOIN batchclaim.failover_shards s ON s.shard = n.shard
			WHERE n.node_id = ANY($1) AND n.epoch = s.epoch AND n.primary_id = s.primary_id
			  AND n.role = CASE WHEN n.node_id = s.primary_id THEN 'primary' ELSE 'replica' END`, ids) == int64(len(ids))
	})
}

func TestPrimaryKilled(t *testing.T) {
	t.Parallel()
	pool, procs := faultShard(t, 0, false)
	procs["p"].Signal(t, syscall.SIGKILL)
	epoch, primary, _ := completed(t, pool, 2)
	if primary != "b" {
		t.Fatalf("new primary %q at epoch %d, want b (950, the most up to date)", primary, epoch)
	}
	settled(t, pool, "a", "b")
	wantClean(t, audit(t, dbtest.Open(t, pool, ""), "f"))
}

// A primary frozen past its lease is replaced; when it runs again it finds the newer epoch
// and becomes a replica of the new primary, and its terms never overlap the new one's.
func TestPrimaryStoppedPastExpiry(t *testing.T) {
	t.Parallel()
	pool, procs := faultShard(t, 0, false)
	procs["p"].Signal(t, syscall.SIGSTOP)
	_, primary, _ := completed(t, pool, 2)
	settled(t, pool, "a", "b")
	procs["p"].Signal(t, syscall.SIGCONT)
	settled(t, pool, "a", "b", "p")
	if r := scalar[string](t, pool, `SELECT role || '@' || epoch || ':' || primary_id FROM batchclaim.failover_nodes WHERE node_id = 'p'`); r != "replica@2:"+primary {
		t.Fatalf("old primary after SIGCONT: %s", r)
	}
	wantClean(t, audit(t, dbtest.Open(t, pool, ""), "f"))
}

// The orchestrator dies between recording its decision and sending any command: its lock
// expires and another replica finishes the failover from the durable decision.
func TestOrchestratorKilledMidFailover(t *testing.T) {
	t.Parallel()
	pool, procs := faultShard(t, 2, true)
	procs["p"].Signal(t, syscall.SIGKILL)
	x := stalledOrchestrator(t, pool, procs)
	x.Signal(t, syscall.SIGKILL)
	_, _, by := completed(t, pool, 2)
	if by == x.id {
		t.Fatalf("completed by the killed orchestrator %s", by)
	}
	live := without([]string{"a", "b", "c"}, x.id)
	settled(t, pool, live...)
	testutil.WaitFor(t, 30*time.Second, "the killed orchestrator's registration to go stale", func() bool {
		return scalar[bool](t, pool, `SELECT last_updated < now() - interval '2 seconds' FROM batchclaim.failover_nodes WHERE node_id = $1`, x.id)
	})
	a := audit(t, dbtest.Open(t, pool, ""), "f")
	wantClean(t, a)
	if a.LockExpired == 0 || a.Resumed != 1 || a.Decisions != 1 {
		t.Fatalf("audit %+v: want the killed orchestrator's lock expired and its decision completed by another node", a)
	}
}

// The orchestrator is frozen past the lock's TTL between its decision and its commands;
// another replica completes the failover. When the frozen one runs again, its lock is gone
// and every further step it tries is refused by the fence.
func TestOrchestratorStoppedPastLockTTL(t *testing.T) {
	t.Parallel()
	pool, procs := faultShard(t, 2, true)
	procs["p"].Signal(t, syscall.SIGKILL)
	x := stalledOrchestrator(t, pool, procs)
	x.Signal(t, syscall.SIGSTOP)
	_, _, by := completed(t, pool, 2)
	if by == x.id {
		t.Fatalf("completed by the frozen orchestrator %s", by)
	}
	x.Signal(t, syscall.SIGCONT)
	if _, err := fmt.Fprintln(x.Stdin()); err != nil { // let its AfterDecision hook return
		t.Fatal(err)
	}
	testutil.WaitFor(t, 30*time.Second, "the stale orchestrator to be refused", func() bool { return x.Said("lock not held") })
	settled(t, pool, "a", "b", "c")
	a := audit(t, dbtest.Open(t, pool, ""), "f")
	wantClean(t, a)
	if a.Resumed != 1 || a.Decisions != 1 {
		t.Fatalf("audit %+v: want the one decision completed by another node", a)
	}
}

// stalledOrchestrator waits for the node that decided epoch 2 to stop in its hook.
func stalledOrchestrator(t *testing.T, pool *pgxpool.Pool, procs map[string]*nodeProc) *nodeProc {
	t.Helper()
	var x *nodeProc
	testutil.WaitFor(t, 60*time.Second, "an orchestrator to decide epoch 2", func() bool {
		for _, p := range procs {
			if p.Said("decided 2") {
				x = p
				return true
			}
		}
		return false
	})
	if by := scalar[string](t, pool, `SELECT decided_by FROM batchclaim.failover_decisions WHERE epoch = 2`); by != x.id {
		t.Fatalf("decision recorded by %s, stalled node is %s", by, x.id)
	}
	return x
}

func patience(id string) time.Duration {
	if id == "b" {
		return 5 * time.Second
	}
	return 0
}

func without(ids []string, drop string) []string {
	var out []string
	for _, id := range ids {
		if id != drop {
			out = append(out, id)
		}
	}
	return out
}
