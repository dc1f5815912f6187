package failover

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/batchclaim/batchclaim/internal/db"
	"github.com/batchclaim/batchclaim/internal/notify"
	"github.com/batchclaim/batchclaim/pgdb"
)

// notifyChannel is the LISTEN/NOTIFY channel that wakes nodes; the payload is a node id.
const notifyChannel = "failover_commands"

// Command kinds: the source design's "switch to primary" and `REPLICAOF <ip> <port>`.
const (
	KindPromote   = "promote"
	KindReplicaOf = "replicaof"
)

// Command is one entry of a node's queue.
type Command struct {
	ID             int64
	Shard          string
	Epoch          int64
	Kind           string
	PrimaryID      string
	PrimaryAddress string
	IssuedBy       string
	// Applied is false when the command was stale (an older epoch than the node had acted on,
	// or a promote the shard's decision no longer backs): consumed and ignored.
	Applied bool
}

// ConsumeCommands pops and applies the node's queued commands, oldest first, until the queue
// is empty, and returns how many it consumed. Each command is marked consumed in the same
// transaction that applies it (SELECT ... FOR UPDATE SKIP LOCKED, then UPDATE), so it takes
// effect exactly once even if two consumers read the same queue or the node dies halfway.
func (n *Node) ConsumeCommands(ctx context.Context) (int, error) {
	count := 0
	for {
		cmd, ok, err := n.consumeOne(ctx)
		if err != nil {
			return count, fmt.Errorf("consume commands: %w", err)
		}
		if !ok {
			return count, nil
		}
		count++
		if n.cfg.OnCommand != nil {
			n.cfg.OnCommand(cmd)
		}
	}
}

func (n *Node) consumeOne(ctx context.Context) (Command, bool, error) {
	n.opMu.Lock()
	defer n.opMu.Unlock()
	var cmd Command
	var found, promoted bool
	var next State
	sent := time.Now()
	cur := n.State()
	err := n.inTx(ctx, func(tx pgx.Tx) error {
		found, promoted, next = false, false, cur
		row, err := n.q.FailoverCommandConsume(ctx, tx, n.cfg.NodeID)
		if pgdb.NoRows(err) {
			return nil
		}
		if err != nil {
			return err
		}
		found = true
		cmd = Command{ID: row.ID, Shard: row.Shard, Epoch: row.Epoch, Kind: row.Kind, PrimaryID: row.PrimaryID,
			PrimaryAddress: row.PrimaryAddress, IssuedBy: row.IssuedBy}
		if cmd.Epoch < cur.Epoch || (cmd.Epoch == cur.Epoch && cur.Role == RolePrimary) {
			return nil // an older decision: the node acts on the highest epoch it has seen
		}
		switch cmd.Kind {
		case KindPromote:
			shard, err := n.q.FailoverShardShare(ctx, tx, n.cfg.Shard)
			if err != nil {
				return err
			}
			if shard.Epoch != cmd.Epoch || shard.PrimaryID != n.cfg.NodeID {
				return nil // superseded by a later decision
			}
			if _, err := n.q.FailoverRoleRecord(ctx, tx, db.FailoverRoleRecordParams{Shard: n.cfg.Shard, NodeID: n.cfg.NodeID,
				Epoch: cmd.Epoch, Role: string(RolePrimary), PrimaryID: n.cfg.NodeID, LeaseMs: n.cfg.PrimaryLease.Milliseconds()}); err != nil {
				return err
			}
			next = State{Role: RolePrimary, Epoch: cmd.Epoch, PrimaryID: n.cfg.NodeID, PrimaryAddress: n.cfg.Address}
			promoted = true
		case KindReplicaOf:
			if cmd.PrimaryID == n.cfg.NodeID {
				return nil
			}
			next = State{Role: RoleReplica, Epoch: cmd.Epoch, PrimaryID: cmd.PrimaryID, PrimaryAddress: cmd.PrimaryAddress}
			if err := n.record(ctx, tx, next); err != nil {
				return err
			}
		default:
			return nil
		}
		cmd.Applied = true
		_, err = n.q.FailoverNodeRegister(ctx, tx, db.FailoverNodeRegisterParams{
			NodeID: n.cfg.NodeID, Shard: n.cfg.Shard, Address: n.cfg.Address, Role: string(next.Role),
			PrimaryID: next.PrimaryID, Epoch: next.Epoch, LastTxnID: n.progress()})
		return err
	})
	if err != nil || !found {
		return Command{}, false, err
	}
	n.log.Info("command consumed", "kind", cmd.Kind, "epoch", cmd.Epoch, "primary_id", cmd.PrimaryID, "applied", cmd.Applied, "issued_by", cmd.IssuedBy)
	if cmd.Applied {
		n.adopt(next, promoted, sent)
	}
	return cmd, true, nil
}

// consumeLoop drains the queue whenever a notification for this node arrives (internal/notify
// on a connection taken out of the pool, unless DisableListen), right after the connection
// listens (commands queued before are not notified again), and every PollInterval in any
// case: the fallback when a notification is lost or the connection is down. The connection
// runs LISTEN only, which names no table; the queue is read through the DB, in its schema.
// The channel is the database's, shared by every schema's shards, and the payload is a node
// id: a node of another schema with the same id drains its queue once for nothing.
func (n *Node) consumeLoop(ctx context.Context) {
	wake := make(chan struct{}, 1)
	poke := func() {
		select {
		case wake <- struct{}{}:
		default:
		}
	}
	if !n.cfg.DisableListen {
		var wg sync.WaitGroup
		defer wg.Wait()
		wg.Go(func() {
			_ = notify.Run(ctx, notify.Config{
				Dial: func(ctx context.Context) (*pgx.Conn, error) {
					pc, err := n.db.Pool().Acquire(ctx)
					if err != nil {
						return nil, err
					}
					return pc.Hijack(), nil
				},
				Channels: []string{notifyChannel},
				OnListen: poke,
				OnNotify: func(note *pgconn.Notification) {
					if note.Payload == n.cfg.NodeID {
						poke()
					}
				},
				OnLost: func(err error, wait time.Duration) {
					n.log.Warn("listening for commands failed; polling until it works again", "error", err, "retry_in", wait)
				},
			})
		})
	}
	t := time.NewTicker(n.cfg.PollInterval)
	defer t.Stop()
	for {
		n.drain(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-wake:
		}
	}
}

func (n *Node) drain(ctx context.Context) {
	if _, err := n.ConsumeCommands(ctx); err != nil && ctx.Err() == nil {
		n.log.Warn("command queue", "error", err)
	}
}
