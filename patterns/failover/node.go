package failover

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	dbq "github.com/batchclaim/batchclaim/internal/db"
	"github.com/batchclaim/batchclaim/internal/lease"
	"github.com/batchclaim/batchclaim/patterns/lock"
	"github.com/batchclaim/batchclaim/pgdb"
)

// Role is what a node does in its shard.
type Role string

const (
	RolePrimary Role = "primary"
	RoleReplica Role = "replica"
)

// State is a node's view of itself.
type State struct {
	Role Role
	// Epoch is the highest shard epoch the node has acted on.
	Epoch          int64
	PrimaryID      string
	PrimaryAddress string
	// Acting is true while the node is primary and its lease, by its own monotonic clock, has
	// not run out: only then may it serve writes.
	Acting bool
}

// Node is one member of a shard: it registers itself every heartbeat interval, acts as
// primary or replica as the shard's recorded decision says, consumes its command queue, and,
// as a replica, starts a failover when the primary's heartbeat is older than its patience.
type Node struct {
	cfg      Config
	db       pgdb.DB // every statement goes through it; its Pool gives the LISTEN connection
	q        *dbq.Queries
	locker   *lock.Locker
	log      *slog.Logger
	patience time.Duration

	// opMu serializes the node's own state changes: heartbeats and command transactions.
	opMu sync.Mutex
	mu   sync.Mutex // guards the fields below
	st   State
	// acting is the local deadline of the primary's right to act (internal/lease, as every
	// lease of the project keeps its deadline): PrimaryLease - Margin after the send time of
	// the heartbeat that last renewed the primary row.
	acting *lease.Deadline
	// recorded is the last (role, epoch, primary) written to failover_roles by this process.
	recorded State

	failing sync.Mutex // held while this node orchestrates a failover
}

// New checks cfg and returns a Node on db, whose statements run in db's schema. It does no
// I/O. Every node of a shard uses the same schema.
func New(db pgdb.DB, cfg Config) (*Node, error) {
	cfg, err := cfg.Resolve()
	if err != nil {
		return nil, err
	}
	if err := db.Err(); err != nil {
		return nil, fmt.Errorf("failover: %w", err)
	}
	locker, err := lock.New(db, lock.Config{TTL: cfg.LockTTL, Logger: cfg.Logger})
	if err != nil {
		return nil, fmt.Errorf("failover: %w", err)
	}
	patience := cfg.Patience
	if cfg.PatienceJitter > 0 {
		patience += rand.N(cfg.PatienceJitter)
	}
	return &Node{
		cfg: cfg, db: db, q: dbq.New(), locker: locker, patience: patience,
		log:    cfg.Logger.With("node_id", cfg.NodeID, "shard", cfg.Shard),
		st:     State{Role: RoleReplica},
		acting: lease.NewDeadline(cfg.PrimaryLease-cfg.Margin, nil),
	}, nil
}

// LockName is the name of a shard's failover lock: one failover of a shard at a time.
func LockName(shard string) string { return "failover:" + shard }

// Patience is this node's own patience: Config.Patience plus its share of the jitter.
func (n *Node) Patience() time.Duration { return n.patience }

// State returns the node's current view of itself.
func (n *Node) State() State {
	n.mu.Lock()
	defer n.mu.Unlock()
	s := n.st
	s.Acting = s.Role == RolePrimary && n.acting.Live()
	return s
}

// Run heartbeats, watches the primary and consumes commands until ctx ends; it returns ctx's
// error. A failed step is logged and retried at the next interval.
func (n *Node) Run(ctx context.Context) error {
	defer n.acting.Stop() // a node that no longer heartbeats does not act
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { n.consumeLoop(ctx) })
	t := time.NewTicker(n.cfg.HeartbeatInterval)
	defer t.Stop()
	for {
		if err := n.Heartbeat(ctx); err != nil && ctx.Err() == nil {
			n.log.Warn("heartbeat failed", "error", err)
		}
		if n.State().Role == RoleReplica && n.failing.TryLock() {
			wg.Go(func() {
				defer n.failing.Unlock()
				if _, err := n.Watch(ctx); err != nil && ctx.Err() == nil {
					n.log.Warn("failover failed", "error", err)
				}
			})
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// Heartbeat is one step of the node's own loop: in one transaction it reads the shard's
// decision (creating the shard if Bootstrap says so), renews its primary lease if the
// decision names it and it took over at that epoch, steps down or follows a new primary if
// the decision moved past it, and rewrites its record.
func (n *Node) Heartbeat(ctx context.Context) error {
	n.opMu.Lock()
	defer n.opMu.Unlock()
	sent := time.Now()
	cur := n.State()
	next, renewed := cur, false
	err := n.inTx(ctx, func(tx pgx.Tx) error {
		next, renewed = cur, false
		shard, err := n.q.FailoverShardShare(ctx, tx, n.cfg.Shard)
		if pgdb.NoRows(err) && n.cfg.Bootstrap {
			if err := n.bootstrap(ctx, tx); err != nil {
				return err
			}
			shard, err = n.q.FailoverShardShare(ctx, tx, n.cfg.Shard)
		}
		switch {
		case pgdb.NoRows(err): // no shard yet: register and wait
		case err != nil:
			return err
		case shard.PrimaryID == n.cfg.NodeID:
			_, err := n.q.FailoverPrimaryRenew(ctx, tx, dbq.FailoverPrimaryRenewParams{
				LeaseMs: n.cfg.PrimaryLease.Milliseconds(), Shard: n.cfg.Shard, NodeID: n.cfg.NodeID, Epoch: shard.Epoch})
			switch {
			case err == nil:
				next = State{Role: RolePrimary, Epoch: shard.Epoch, PrimaryID: n.cfg.NodeID, PrimaryAddress: n.cfg.Address}
				renewed = true
			case !pgdb.NoRows(err):
				return err
			}
			// No primary row at this epoch: chosen, but the promote command has not arrived.
		case shard.Epoch >= cur.Epoch && (cur.Role != RoleReplica || cur.PrimaryID != shard.PrimaryID || cur.Epoch != shard.Epoch):
			next = State{Role: RoleReplica, Epoch: shard.Epoch, PrimaryID: shard.PrimaryID, PrimaryAddress: n.addressOf(ctx, tx, shard.PrimaryID)}
		}
		if err := n.record(ctx, tx, next); err != nil {
			return err
		}
		_, err = n.q.FailoverNodeRegister(ctx, tx, dbq.FailoverNodeRegisterParams{
			NodeID: n.cfg.NodeID, Shard: n.cfg.Shard, Address: n.cfg.Address, Role: string(next.Role),
			PrimaryID: next.PrimaryID, Epoch: next.Epoch, LastTxnID: n.progress()})
		return err
	})
	if err != nil {
		return fmt.Errorf("heartbeat: %w", err)
	}
	n.adopt(next, renewed, sent)
	return nil
}

// bootstrap creates the shard with this node as primary at epoch 1 and its primary row.
func (n *Node) bootstrap(ctx context.Context, tx pgx.Tx) error {
	created, err := n.q.FailoverShardBootstrap(ctx, tx, dbq.FailoverShardBootstrapParams{Shard: n.cfg.Shard, PrimaryID: n.cfg.NodeID})
	if err != nil || created == 0 {
		return err
	}
	_, err = n.q.FailoverRoleRecord(ctx, tx, dbq.FailoverRoleRecordParams{Shard: n.cfg.Shard, NodeID: n.cfg.NodeID, Epoch: 1,
		Role: string(RolePrimary), PrimaryID: n.cfg.NodeID, LeaseMs: n.cfg.PrimaryLease.Milliseconds()})
	if err == nil {
		n.log.Info("shard bootstrapped", "epoch", 1)
	}
	return err
}

// record writes a replica row to failover_roles when the node's role, epoch or primary
// changed since the last row it wrote (primary rows are written by promote and bootstrap).
func (n *Node) record(ctx context.Context, tx pgx.Tx, next State) error {
	n.mu.Lock()
	last := n.recorded
	n.mu.Unlock()
	if next.Role != RoleReplica || next.PrimaryID == "" ||
		(last.Role == next.Role && last.Epoch == next.Epoch && last.PrimaryID == next.PrimaryID) {
		return nil
	}
	_, err := n.q.FailoverRoleRecord(ctx, tx, dbq.FailoverRoleRecordParams{Shard: n.cfg.Shard, NodeID: n.cfg.NodeID, Epoch: next.Epoch,
		Role: string(RoleReplica), PrimaryID: next.PrimaryID})
	return err
}

// adopt makes the committed state the node's own, and reports a change.
func (n *Node) adopt(next State, renewed bool, sent time.Time) {
	n.mu.Lock()
	prev := n.st
	n.st = next
	if renewed {
		n.acting.Start(sent)
	} else if next.Role != RolePrimary {
		n.acting.Lose()
	}
	if next.Role == RolePrimary || next.PrimaryID != "" {
		n.recorded = next
	}
	n.mu.Unlock()
	if prev.Role != next.Role || prev.Epoch != next.Epoch || prev.PrimaryID != next.PrimaryID {
		n.log.Info("role changed", "role", next.Role, "epoch", next.Epoch, "primary_id", next.PrimaryID, "was", prev.Role, "was_epoch", prev.Epoch)
		if n.cfg.OnRole != nil {
			n.cfg.OnRole(n.State())
		}
	}
}

func (n *Node) addressOf(ctx context.Context, tx pgx.Tx, nodeID string) string {
	r, err := n.q.FailoverNodeLive(ctx, tx, dbq.FailoverNodeLiveParams{NodeID: nodeID, WindowMs: n.cfg.Patience.Milliseconds()})
	if err != nil {
		return ""
	}
	return r.Address
}

func (n *Node) progress() int64 {
	if n.cfg.Progress != nil {
		return n.cfg.Progress()
	}
	return n.cfg.LastTxnID
}

// inTx runs fn in a READ COMMITTED transaction whose lock waits are bounded, and which the
// server ends if the node stalls in the middle of it (a paused process must not hold the
// shard row), so that no other node waits for long.
func (n *Node) inTx(ctx context.Context, fn func(pgx.Tx) error) error {
	return pgdb.InTx(ctx, n.db, pgx.TxOptions{}, func(tx pgx.Tx) error {
		wait := max(n.cfg.PrimaryLease/2, 50*time.Millisecond)
		if err := pgdb.GuardTx(ctx, tx, wait, 2*wait); err != nil {
			return err
		}
		return fn(tx)
	})
}
