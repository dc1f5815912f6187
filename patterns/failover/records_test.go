package failover_test

import (
	"errors"
	"testing"
	"time"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/patterns/failover"
	"github.com/batchclaim/batchclaim/pgdb"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
)

// Shard, Decisions and Nodes read back what a superseded and a completed failover recorded:
// c chosen at epoch 2 and superseded when it died, b chosen at epoch 3 and completed.
func TestRecords(t *testing.T) {
	t.Parallel()
	db := dbtest.NewOpen(t)
	pool, ctx := db.Pool(), t.Context()
	nodes := shardOf4(t, db, 200*time.Millisecond, nil)
	if s, err := failover.Shard(ctx, db, "s"); err != nil || s != (failover.ShardRecord{Shard: "s", Epoch: 1, PrimaryID: "p", UpdatedAt: s.UpdatedAt}) || s.UpdatedAt.IsZero() {
		t.Fatalf("bootstrapped shard: %+v %v", s, err)
	}
	if ds, err := failover.Decisions(ctx, db, "s"); err != nil || len(ds) != 0 {
		t.Fatalf("decisions of a bootstrapped shard: %+v %v", ds, err)
	}
	primaryGone(t, pool, "p")
	if out, err := nodes["a"].Failover(ctx); err != nil || out != failover.OutcomeUnconfirmed {
		t.Fatalf("first failover: %v %v", out, err)
	}
	deadNode(t, pool, "c")
	mustExec(t, pool, `UPDATE batchclaim.failover_shards SET updated_at = now() - interval '1 hour'`)
	if out, err := nodes["a"].Watch(ctx); err != nil || out != failover.OutcomeUnconfirmed {
		t.Fatalf("second failover: %v %v", out, err)
	}
	if _, err := nodes["b"].ConsumeCommands(ctx); err != nil {
		t.Fatal(err)
	}
	if out, err := nodes["a"].Failover(ctx); err != nil || out != failover.OutcomeCompleted {
		t.Fatalf("completing: %v %v", out, err)
	}
	for _, id := range []string{"a", "b"} {
		if err := nodes[id].Heartbeat(ctx); err != nil {
			t.Fatal(err)
		}
	}

	s, err := failover.Shard(ctx, db, "s")
	if err != nil || s.Shard != "s" || s.Epoch != 3 || s.PrimaryID != "b" {
		t.Fatalf("shard: %+v %v, want epoch 3 primary b", s, err)
	}
	ds, err := failover.Decisions(ctx, db, "s")
	if err != nil || len(ds) != 2 {
		t.Fatalf("decisions: %+v %v, want 2", ds, err)
	}
	for i, want := range []struct {
		epoch        int64
		newPrimary   string
		outcome      string
		completedBy  string
		decidedBy    string
		oldPrimaryIs string
	}{
		{2, "c", failover.DecisionSuperseded, "a", "a", "p"},
		{3, "b", failover.DecisionCompleted, "a", "a", ""},
	} {
		d := ds[i]
		if d.Shard != "s" || d.Epoch != want.epoch || d.NewPrimary != want.newPrimary || d.Outcome != want.outcome ||
			d.CompletedBy != want.completedBy || d.DecidedBy != want.decidedBy || d.LockEpoch < 1 ||
			d.DecidedAt.IsZero() || d.CompletedAt == nil || d.CompletedAt.Before(d.DecidedAt) ||
			(want.oldPrimaryIs != "" && d.OldPrimary != want.oldPrimaryIs) {
			t.Errorf("decision %d: %+v, want epoch %d to %s, %s by %s", i, d, want.epoch, want.newPrimary, want.outcome, want.completedBy)
		}
	}
	regs, err := failover.Nodes(ctx, db, "s", 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]failover.NodeRecord{}
	for i, r := range regs {
		if i > 0 && regs[i-1].NodeID >= r.NodeID {
			t.Fatalf("nodes not by id: %+v", regs)
		}
		byID[r.NodeID] = r
	}
	if b := byID["b"]; !b.Live || b.Role != failover.RolePrimary || b.Epoch != 3 || b.PrimaryID != "b" || b.LastTxnID != 90 || b.LastUpdated.IsZero() {
		t.Errorf("b: %+v, want the live primary at epoch 3 with progress 90", b)
	}
	if a := byID["a"]; !a.Live || a.Role != failover.RoleReplica || a.Epoch != 3 || a.PrimaryID != "b" || a.LastTxnID != 50 {
		t.Errorf("a: %+v, want a live replica of b at epoch 3 with progress 50", a)
	}
	for _, id := range []string{"p", "c"} {
		if r, ok := byID[id]; ok && r.Live {
			t.Errorf("%s: %+v, want it dead (its registration is an hour old) or deleted", id, r)
		}
	}
	if regs, err := failover.Nodes(ctx, db, "s", 2*time.Hour); err != nil || len(regs) < 3 || !byIDLive(regs, "p") && !byIDLive(regs, "c") {
		t.Errorf("nodes with a window of two hours: %+v %v, want the hour-old registrations live", regs, err)
	}

	if _, err := failover.Shard(ctx, db, "nope"); !errors.Is(err, batchclaim.ErrNotFound) {
		t.Errorf("unknown shard: %v, want ErrNotFound", err)
	}
	if ds, err := failover.Decisions(ctx, db, "nope"); err != nil || len(ds) != 0 {
		t.Errorf("decisions of an unknown shard: %+v %v", ds, err)
	}
	if _, err := failover.Nodes(ctx, pgdb.DB{}, "s", time.Second); err == nil {
		t.Error("Nodes accepted the zero DB")
	}
	if _, err := failover.Decisions(ctx, pgdb.DB{}, "s"); err == nil {
		t.Error("Decisions accepted the zero DB")
	}
	if _, err := failover.Shard(ctx, pgdb.DB{}, "s"); err == nil {
		t.Error("Shard accepted the zero DB")
	}
}

// byIDLive reports whether regs holds a live registration of id.
func byIDLive(regs []failover.NodeRecord, id string) bool {
	for _, r := range regs {
		if r.NodeID == id {
			return r.Live
		}
	}
	return false
}
