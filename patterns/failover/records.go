package failover

import (
	"context"
	"fmt"
	"time"

	dbq "github.com/batchclaim/batchclaim/internal/db"
	"github.com/batchclaim/batchclaim/pgdb"
)

// The outcomes a recorded decision ends with (DecisionRecord.Outcome); it has none while it
// is open.
const (
	// DecisionCompleted: the decision's new primary took over.
	DecisionCompleted = "completed"
	// DecisionSuperseded: a later decision replaced it before its new primary took over.
	DecisionSuperseded = "superseded"
)

// ShardRecord is a shard's recorded decision, as Shard reads it: the epoch in force and the
// node that is primary at that epoch.
type ShardRecord struct {
	Shard     string
	Epoch     int64
	PrimaryID string
	// UpdatedAt is the database time of the shard's last change of epoch.
	UpdatedAt time.Time
}

// DecisionRecord is a failover decision with what became of it, as Decisions reads it.
type DecisionRecord struct {
	Decision
	// DecidedAt is the database time the decision was recorded.
	DecidedAt time.Time
	// Outcome is DecisionCompleted or DecisionSuperseded once settled, "" while open.
	Outcome string
	// CompletedAt and CompletedBy say when and by which node the outcome was recorded: nil
	// and "" while the decision is open.
	CompletedAt *time.Time
	CompletedBy string
}

// NodeRecord is a node's registration in its shard (what its last heartbeat wrote), as Nodes
// reads it.
type NodeRecord struct {
	NodeID    string
	Role      Role
	PrimaryID string
	// Epoch is the shard epoch the node last acted on, and LastTxnID its progress then.
	Epoch     int64
	LastTxnID int64
	// LastUpdated is the database time of the node's last heartbeat.
	LastUpdated time.Time
	// Live is true when LastUpdated is within the live window Nodes was given, by the
	// database clock.
	Live bool
}

// Shard returns the recorded decision of shard; an error wrapping batchclaim.ErrNotFound
// when the shard was never bootstrapped.
func Shard(ctx context.Context, db pgdb.DB, shard string) (ShardRecord, error) {
	if err := db.Err(); err != nil {
		return ShardRecord{}, fmt.Errorf("failover: %w", err)
	}
	r, err := dbq.New().FailoverShardGet(ctx, db, shard)
	if err != nil {
		return ShardRecord{}, fmt.Errorf("read shard %s: %w", shard, pgdb.NotFound(err))
	}
	return ShardRecord{Shard: shard, Epoch: r.Epoch, PrimaryID: r.PrimaryID, UpdatedAt: r.UpdatedAt}, nil
}

// Decisions returns every failover decision recorded for shard, oldest (lowest epoch) first.
func Decisions(ctx context.Context, db pgdb.DB, shard string) ([]DecisionRecord, error) {
	if err := db.Err(); err != nil {
		return nil, fmt.Errorf("failover: %w", err)
	}
	rows, err := dbq.New().FailoverDecisions(ctx, db, shard)
	if err != nil {
		return nil, fmt.Errorf("read decisions of shard %s: %w", shard, err)
	}
	out := make([]DecisionRecord, len(rows))
	for i, r := range rows {
		out[i] = DecisionRecord{
			Decision: Decision{Shard: shard, Epoch: r.Epoch, OldPrimary: r.OldPrimary, NewPrimary: r.NewPrimary,
				DecidedBy: r.DecidedBy, LockEpoch: r.LockEpoch},
			DecidedAt: r.DecidedAt, CompletedAt: r.CompletedAt,
		}
		if r.Outcome != nil {
			out[i].Outcome = *r.Outcome
		}
		if r.CompletedBy != nil {
			out[i].CompletedBy = *r.CompletedBy
		}
	}
	return out, nil
}

// Nodes returns the registration of every node of shard, by node id. liveWindow says how
// recent a registration must be for its node to count as live (NodeRecord.Live): use the
// nodes' Patience, as Check does.
func Nodes(ctx context.Context, db pgdb.DB, shard string, liveWindow time.Duration) ([]NodeRecord, error) {
	if err := db.Err(); err != nil {
		return nil, fmt.Errorf("failover: %w", err)
	}
	rows, err := dbq.New().FailoverNodes(ctx, db, dbq.FailoverNodesParams{Shard: shard, WindowMs: liveWindow.Milliseconds()})
	if err != nil {
		return nil, fmt.Errorf("read nodes of shard %s: %w", shard, err)
	}
	out := make([]NodeRecord, len(rows))
	for i, r := range rows {
		out[i] = NodeRecord{NodeID: r.NodeID, Role: Role(r.Role), PrimaryID: r.PrimaryID, Epoch: r.Epoch,
			LastTxnID: r.LastTxnID, LastUpdated: r.LastUpdated, Live: r.Live}
	}
	return out, nil
}
