package failover_test

import (
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batchclaim/batchclaim/patterns/failover"
	"github.com/batchclaim/batchclaim/pgdb"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
)

// shardOf4 registers a primary p (progress 100, bootstrapped) and replicas a (50), b (90)
// and c (95), each by one heartbeat, with the given confirm timeout.
func shardOf4(t *testing.T, db pgdb.DB, confirm time.Duration, onCmd func(failover.Command)) map[string]*failover.Node {
	t.Helper()
	nodes := map[string]*failover.Node{}
	for _, s := range []struct {
		id       string
		progress int64
	}{{"p", 100}, {"a", 50}, {"b", 90}, {"c", 95}} {
		cfg := testConfig("s", s.id, s.progress)
		cfg.Bootstrap = s.id == "p"
		cfg.ConfirmTimeout = confirm
		cfg.OnCommand = onCmd
		nodes[s.id] = newNode(t, db, cfg)
		if err := nodes[s.id].Heartbeat(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	// The primary acts for PrimaryLease - Margin (0.9 s) after its last heartbeat: renew it
	// right before looking, so that a slow machine's four heartbeats above do not matter.
	if err := nodes["p"].Heartbeat(t.Context()); err != nil {
		t.Fatal(err)
	}
	if st := nodes["p"].State(); st.Role != failover.RolePrimary || st.Epoch != 1 || !st.Acting {
		t.Fatalf("bootstrapped primary: %+v", st)
	}
	if st := nodes["a"].State(); st.Role != failover.RoleReplica || st.PrimaryID != "p" || st.Epoch != 1 {
		t.Fatalf("replica: %+v", st)
	}
	return nodes
}

// primaryGone moves the primary's last heartbeat (and the shard's last decision) an hour into
// the past, as if it had stopped long ago; deadNode does the same to a node's registration.
func primaryGone(t *testing.T, pool *pgxpool.Pool, node string) {
	t.Helper()
	mustExec(t, pool, `UPDATE batchclaim.failover_roles SET renewed_at = now() - interval '1 hour', lease_until = now() - interval '59 minutes'
		WHERE node_id = $1 AND role = 'primary'`, node)
	mustExec(t, pool, `UPDATE batchclaim.failover_shards SET updated_at = now() - interval '1 hour'`)
	deadNode(t, pool, node)
}

func deadNode(t *testing.T, pool *pgxpool.Pool, node string) {
	t.Helper()
	mustExec(t, pool, `UPDATE batchclaim.failover_nodes SET last_updated = now() - interval '1 hour' WHERE node_id = $1`, node)
}

// The replica that takes the lock picks the live node with the highest progress: c (95) is
// dead and passed over, b (90) wins over a (50). The decision is durable before any
// command; the new primary takes over only through its promote command; a second
// orchestration resumes the open decision and completes it; the old primary, back, steps
// down on the newer epoch and ignores a command of its old epoch.
func TestFailoverPicksMostUpToDateLiveReplica(t *testing.T) {
	t.Parallel()
	db := dbtest.NewOpen(t)
	pool := db.Pool()
	ctx := t.Context()
	var mu sync.Mutex
	var consumed []failover.Command
	nodes := shardOf4(t, db, 300*time.Millisecond, func(c failover.Command) { mu.Lock(); consumed = append(consumed, c); mu.Unlock() })

	if out, err := nodes["a"].Watch(ctx); err != nil || out != failover.OutcomeNothing {
		t.Fatalf("watch with a healthy primary: %v %v", out, err)
	}
	primaryGone(t, pool, "p")
	deadNode(t, pool, "c")
	// Nobody consumes b's promote yet: the orchestrator gives up waiting, the decision stays.
	out, err := nodes["a"].Watch(ctx)
	if err != nil || out != failover.OutcomeUnconfirmed {
		t.Fatalf("watch with the primary gone: %v %v", out, err)
	}
	if e, p := scalar[int64](t, pool, `SELECT epoch FROM batchclaim.failover_shards`), scalar[string](t, pool, `SELECT primary_id FROM batchclaim.failover_shards`); e != 2 || p != "b" {
		t.Fatalf("shard after the decision: epoch %d primary %q, want 2 b", e, p)
	}
	if got := scalar[string](t, pool, `SELECT string_agg(node_id || ':' || kind, ',' ORDER BY node_id) FROM batchclaim.failover_commands`); got != "a:replicaof,b:promote" {
		t.Fatalf("commands %q: want a promote to b and a REPLICAOF to a (c is dead, p is gone)", got)
	}
	if st := nodes["b"].State(); st.Role != failover.RoleReplica {
		t.Fatalf("b became primary without its command: %+v", st)
	}
	// A heartbeat alone does not promote b: the decision names it, the command has not run.
	if err := nodes["b"].Heartbeat(ctx); err != nil || nodes["b"].State().Role != failover.RoleReplica {
		t.Fatalf("b after a heartbeat: %+v %v", nodes["b"].State(), err)
	}

	for _, id := range []string{"b", "a"} {
		if n, err := nodes[id].ConsumeCommands(ctx); err != nil || n != 1 {
			t.Fatalf("%s consumed %d commands: %v", id, n, err)
		}
	}
	if st := nodes["b"].State(); st.Role != failover.RolePrimary || st.Epoch != 2 || !st.Acting {
		t.Fatalf("b after its promote command: %+v", st)
	}
	if st := nodes["a"].State(); st.Role != failover.RoleReplica || st.Epoch != 2 || st.PrimaryID != "b" || st.PrimaryAddress != "b:6379" {
		t.Fatalf("a after REPLICAOF: %+v", st)
	}
	if n, err := nodes["b"].ConsumeCommands(ctx); err != nil || n != 0 {
		t.Fatalf("b consumed %d more commands: %v (each is consumed once)", n, err)
	}

	// Another orchestration finds the open decision and the new primary working: completes it.
	out, err = nodes["c"].Failover(ctx)
	if err != nil || out != failover.OutcomeCompleted {
		t.Fatalf("resumed failover: %v %v", out, err)
	}
	if o, by := scalar[string](t, pool, `SELECT outcome FROM batchclaim.failover_decisions WHERE epoch = 2`), scalar[string](t, pool, `SELECT completed_by FROM batchclaim.failover_decisions WHERE epoch = 2`); o != "completed" || by != "c" {
		t.Fatalf("decision: outcome %q by %q", o, by)
	}
	if n := scalar[int64](t, pool, `SELECT count(*) FROM batchclaim.failover_nodes WHERE node_id = 'p'`); n != 0 {
		t.Fatal("the silent old primary's record was not deleted")
	}
	if out, err := nodes["a"].Failover(ctx); err != nil || out != failover.OutcomeNothing {
		t.Fatalf("failover with a working primary and nothing open: %v %v", out, err)
	}

	// The old primary comes back: it sees epoch 2 and follows b. A command of its old epoch
	// is consumed and ignored.
	mustExec(t, pool, `INSERT INTO batchclaim.failover_commands (node_id, shard, epoch, kind, primary_id, issued_by) VALUES ('p', 's', 1, 'promote', 'p', 'test')`)
	if err := nodes["p"].Heartbeat(ctx); err != nil {
		t.Fatal(err)
	}
	if st := nodes["p"].State(); st.Role != failover.RoleReplica || st.Epoch != 2 || st.PrimaryID != "b" || st.Acting {
		t.Fatalf("old primary after its heartbeat: %+v", st)
	}
	if n, err := nodes["p"].ConsumeCommands(ctx); err != nil || n != 1 || nodes["p"].State().Role != failover.RoleReplica {
		t.Fatalf("old primary and its stale command: %d %v %+v", n, err, nodes["p"].State())
	}
	mu.Lock()
	last := consumed[len(consumed)-1]
	mu.Unlock()
	if last.Applied || last.Epoch != 1 {
		t.Fatalf("stale command reported as %+v", last)
	}
	if got := scalar[string](t, pool, `SELECT string_agg(role || '@' || epoch, ',' ORDER BY id) FROM batchclaim.failover_roles WHERE node_id = 'p'`); got != "primary@1,replica@2" {
		t.Fatalf("old primary's role history %q", got)
	}
	a := audit(t, db, "s")
	wantClean(t, a)
	if a.Decisions != 1 || a.Completed != 1 || a.Resumed != 1 || a.Epoch != 2 || a.Primary != "b" {
		t.Fatalf("audit: %+v", a)
	}
}

// A decision whose new primary died before taking over is superseded by the next one, which
// picks the next best live node at a newer epoch; the audit accepts both choices.
func TestFailoverSupersedesDecisionWhoseNewPrimaryDied(t *testing.T) {
	t.Parallel()
	db := dbtest.NewOpen(t)
	pool := db.Pool()
	ctx := t.Context()
	nodes := shardOf4(t, db, 200*time.Millisecond, nil)
	primaryGone(t, pool, "p")
	if out, err := nodes["a"].Failover(ctx); err != nil || out != failover.OutcomeUnconfirmed {
		t.Fatalf("first failover: %v %v", out, err)
	}
	if p := scalar[string](t, pool, `SELECT primary_id FROM batchclaim.failover_shards`); p != "c" {
		t.Fatalf("first choice %q, want c (95)", p)
	}
	// c dies before consuming its promote command.
	deadNode(t, pool, "c")
	mustExec(t, pool, `UPDATE batchclaim.failover_shards SET updated_at = now() - interval '1 hour'`)
	if out, err := nodes["a"].Watch(ctx); err != nil || out != failover.OutcomeUnconfirmed {
		t.Fatalf("second failover: %v %v", out, err)
	}
	if e, p := scalar[int64](t, pool, `SELECT epoch FROM batchclaim.failover_shards`), scalar[string](t, pool, `SELECT primary_id FROM batchclaim.failover_shards`); e != 3 || p != "b" {
		t.Fatalf("second decision: epoch %d primary %q, want 3 b", e, p)
	}
	if o := scalar[string](t, pool, `SELECT outcome FROM batchclaim.failover_decisions WHERE epoch = 2`); o != "superseded" {
		t.Fatalf("first decision's outcome %q", o)
	}
	// b consumes the REPLICAOF c of epoch 2 and its promote of epoch 3.
	if n, err := nodes["b"].ConsumeCommands(ctx); err != nil || n != 2 || nodes["b"].State().Epoch != 3 {
		t.Fatalf("b: %d %v %+v", n, err, nodes["b"].State())
	}
	if out, err := nodes["a"].Failover(ctx); err != nil || out != failover.OutcomeCompleted {
		t.Fatalf("completing: %v %v", out, err)
	}
	a := audit(t, db, "s")
	if a.TwoPrimaries+a.NotMostUpToDate+a.OrphanedFailovers != 0 || a.Decisions != 2 || a.Completed != 1 {
		t.Fatalf("audit: %+v", a)
	}
}

// The audit is not a rubber stamp: a decision that passed over a more up-to-date live node,
// overlapping primary terms, a command left in a live node's queue and a lock left to expire
// without a completed failover are each counted.
func TestAuditCountsViolations(t *testing.T) {
	t.Parallel()
	db := dbtest.NewOpen(t)
	pool := db.Pool()
	shardOf4(t, db, 100*time.Millisecond, nil)
	if a := audit(t, db, "s"); a.Violations() != 0 {
		t.Fatalf("a fresh shard: %+v", a)
	}
	mustExec(t, pool, `INSERT INTO batchclaim.failover_roles (shard, node_id, epoch, role, primary_id, renewed_at, lease_until)
		VALUES ('s', 'a', 7, 'primary', 'a', now(), now() + interval '1 minute')`)
	mustExec(t, pool, `INSERT INTO batchclaim.failover_decision_nodes (shard, epoch, node_id, role, last_txn_id, last_updated)
		VALUES ('s', 9, 'a', 'replica', 50, now()), ('s', 9, 'b', 'replica', 90, now())`)
	mustExec(t, pool, `INSERT INTO batchclaim.failover_decisions (shard, epoch, old_primary, new_primary, decided_by, lock_epoch, live_after, outcome)
		VALUES ('s', 9, 'p', 'a', 'a', 1, now() - interval '1 minute', 'completed')`)
	mustExec(t, pool, `INSERT INTO batchclaim.failover_commands (node_id, shard, epoch, kind, primary_id, issued_by) VALUES ('b', 's', 9, 'replicaof', 'a', 'a')`)
	mustExec(t, pool, `INSERT INTO batchclaim.owner_lock_events (name, epoch, event) VALUES ('failover:s', 1, 'acquired')`)
	a := audit(t, db, "s")
	if a.TwoPrimaries != 1 || a.NotMostUpToDate != 1 || a.LostCommands != 1 || a.OrphanedFailovers != 1 {
		t.Fatalf("audit %+v: want one of each violation", a)
	}
}
