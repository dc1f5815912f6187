package failover

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/batchclaim/batchclaim/internal/db"
	"github.com/batchclaim/batchclaim/patterns/lock"
	"github.com/batchclaim/batchclaim/pgdb"
)

// ErrNoCandidate reports that a failover found no live node to promote.
var ErrNoCandidate = errors.New("no live replica to promote")

// Decision is a failover decision as recorded in failover_decisions.
type Decision struct {
	Shard      string
	Epoch      int64 // the new shard epoch
	OldPrimary string
	NewPrimary string
	DecidedBy  string
	LockEpoch  int64 // the failover lock's epoch that fenced the decision
}

// Outcome says what one call of Failover did.
type Outcome string

const (
	// OutcomeBusy: another node holds the failover lock.
	OutcomeBusy Outcome = "busy"
	// OutcomeNothing: the shard has a primary with a running lease and no unfinished decision.
	OutcomeNothing Outcome = "nothing_to_do"
	// OutcomeCompleted: the new primary took over and the decision is marked completed.
	OutcomeCompleted Outcome = "completed"
	// OutcomeUnconfirmed: commands were sent but the new primary did not take over within
	// ConfirmTimeout; the decision stays open for the next orchestrator.
	OutcomeUnconfirmed Outcome = "unconfirmed"
)

// Watch is a replica's check: if the primary's last heartbeat (or, while a newly chosen
// primary has not taken over, the decision) is older than this node's patience by the
// database clock, it runs Failover. It reports whether it did.
func (n *Node) Watch(ctx context.Context) (Outcome, error) {
	st, err := n.q.FailoverPrimaryStatus(ctx, n.db, db.FailoverPrimaryStatusParams{Shard: n.cfg.Shard, PatienceMs: n.patience.Milliseconds()})
	if pgdb.NoRows(err) {
		return OutcomeNothing, nil
	}
	if err != nil {
		return "", fmt.Errorf("watch primary: %w", err)
	}
	if !st.Stale || st.PrimaryID == n.cfg.NodeID && n.State().Role == RolePrimary {
		return OutcomeNothing, nil
	}
	n.log.Info("primary unresponsive past patience", "primary_id", st.PrimaryID, "epoch", st.Epoch, "patience", n.patience)
	return n.Failover(ctx)
}

// Failover orchestrates a failover of the shard if this node can take the shard's failover
// lock; OutcomeBusy if another node holds it. Under the lock it resumes the open decision if
// there is one whose new primary is alive, else records a new one (the live node with the
// highest progress, at epoch + 1) in one transaction fenced by the lock, then pushes the
// commands onto each live node's queue, waits for the new primary to take over, marks the
// decision completed and releases the lock. The lock is renewed all along; if it is lost,
// every later step is refused by its fence.
func (n *Node) Failover(ctx context.Context) (Outcome, error) {
	lease, err := n.locker.Acquire(ctx, LockName(n.cfg.Shard))
	if errors.Is(err, lock.ErrHeld) {
		return OutcomeBusy, nil
	}
	if err != nil {
		return "", fmt.Errorf("failover: %w", err)
	}
	log := n.log.With("lock_epoch", lease.Epoch)
	log.Info("failover lock taken")
	ctx, cancel := context.WithCancelCause(ctx)
	kept := make(chan struct{})
	go func() {
		defer close(kept)
		if err := n.locker.KeepAlive(ctx, lease); err != nil {
			cancel(err)
		}
	}()
	defer func() {
		cancel(nil)
		<-kept
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Second)
		defer rcancel()
		if err := n.locker.Release(rctx, lease); err != nil {
			log.Warn("release failover lock", "error", err)
		}
	}()
	out, err := n.orchestrate(ctx, lease, log)
	if cause := context.Cause(ctx); err != nil && cause != nil && !errors.Is(cause, context.Canceled) {
		err = fmt.Errorf("%w (%w)", err, cause)
	}
	return out, err
}

func (n *Node) orchestrate(ctx context.Context, lease lock.Lease, log *slog.Logger) (Outcome, error) {
	d, fresh, err := n.decide(ctx, lease)
	if err != nil || d == nil {
		if err == nil {
			log.Info("nothing to do")
			return OutcomeNothing, nil
		}
		return "", fmt.Errorf("failover decision: %w", err)
	}
	if fresh {
		log.Info("failover decided", "epoch", d.Epoch, "old_primary", d.OldPrimary, "new_primary", d.NewPrimary)
		if n.cfg.AfterDecision != nil {
			n.cfg.AfterDecision(ctx, *d)
		}
	} else {
		log.Info("failover resumed", "epoch", d.Epoch, "new_primary", d.NewPrimary, "decided_by", d.DecidedBy)
	}
	sent, err := n.issue(ctx, lease, *d)
	if err != nil {
		return "", fmt.Errorf("failover commands: %w", err)
	}
	log.Info("commands sent", "epoch", d.Epoch, "commands", sent)
	ok, err := n.awaitPrimary(ctx, *d)
	if err != nil {
		return "", fmt.Errorf("await new primary: %w", err)
	}
	if !ok {
		log.Info("new primary did not take over in time", "epoch", d.Epoch, "new_primary", d.NewPrimary)
		return OutcomeUnconfirmed, nil
	}
	if err := n.complete(ctx, lease, *d); err != nil {
		return "", fmt.Errorf("complete failover: %w", err)
	}
	log.Info("failover completed", "epoch", d.Epoch, "new_primary", d.NewPrimary)
	return OutcomeCompleted, nil
}

// decide, in one transaction fenced by the lock, returns the decision to carry out: the open
// one to resume (fresh false), a new one it recorded (fresh true), or nil when the shard has
// a working primary and nothing is open.
func (n *Node) decide(ctx context.Context, lease lock.Lease) (d *Decision, fresh bool, err error) {
	window := n.cfg.Patience.Milliseconds()
	err = n.inTx(ctx, func(tx pgx.Tx) error {
		d, fresh = nil, false
		if err := n.locker.Fence(ctx, tx, lease); err != nil {
			return err
		}
		shard, err := n.q.FailoverShardLock(ctx, tx, n.cfg.Shard)
		if pgdb.NoRows(err) {
			return nil
		}
		if err != nil {
			return err
		}
		prim, err := n.q.FailoverPrimaryRole(ctx, tx, db.FailoverPrimaryRoleParams{Shard: n.cfg.Shard, Epoch: shard.Epoch})
		promoted := err == nil
		if err != nil && !pgdb.NoRows(err) {
			return err
		}
		open, err := n.q.FailoverPendingDecision(ctx, tx, db.FailoverPendingDecisionParams{Shard: n.cfg.Shard, Epoch: shard.Epoch})
		hasOpen := err == nil
		if err != nil && !pgdb.NoRows(err) {
			return err
		}
		resume := func() {
			d = &Decision{Shard: n.cfg.Shard, Epoch: open.Epoch, OldPrimary: open.OldPrimary, NewPrimary: open.NewPrimary,
				DecidedBy: open.DecidedBy, LockEpoch: open.LockEpoch}
		}
		if promoted && prim.LeaseLive {
			if hasOpen {
				resume() // the new primary took over; the rest of the shard may still need its commands
			}
			return nil
		}
		if hasOpen && !promoted {
			live, err := n.q.FailoverNodeLive(ctx, tx, db.FailoverNodeLiveParams{NodeID: open.NewPrimary, WindowMs: window})
			if err != nil && !pgdb.NoRows(err) {
				return err
			}
			if err == nil && live.Live {
				resume()
				return nil
			}
		}
		// Decide anew: snapshot the registrations, pick the most up-to-date live one.
		epoch := shard.Epoch + 1
		if _, err := n.q.FailoverDecisionSnapshot(ctx, tx, db.FailoverDecisionSnapshotParams{Shard: n.cfg.Shard, Epoch: epoch}); err != nil {
			return err
		}
		cand, err := n.q.FailoverCandidate(ctx, tx, db.FailoverCandidateParams{Shard: n.cfg.Shard, Epoch: epoch, OldPrimary: shard.PrimaryID, WindowMs: window})
		if pgdb.NoRows(err) {
			return ErrNoCandidate
		}
		if err != nil {
			return err
		}
		if _, err := n.q.FailoverDecisionsSupersede(ctx, tx, db.FailoverDecisionsSupersedeParams{Shard: n.cfg.Shard, By: n.cfg.NodeID}); err != nil {
			return err
		}
		if _, err := n.q.FailoverShardAdvance(ctx, tx, db.FailoverShardAdvanceParams{Shard: n.cfg.Shard, Epoch: shard.Epoch, NewPrimary: cand.NodeID}); err != nil {
			return err
		}
		if err := n.q.FailoverDecisionInsert(ctx, tx, db.FailoverDecisionInsertParams{Shard: n.cfg.Shard, Epoch: epoch,
			OldPrimary: shard.PrimaryID, NewPrimary: cand.NodeID, DecidedBy: n.cfg.NodeID, LockEpoch: lease.Epoch, WindowMs: window}); err != nil {
			return err
		}
		d = &Decision{Shard: n.cfg.Shard, Epoch: epoch, OldPrimary: shard.PrimaryID, NewPrimary: cand.NodeID, DecidedBy: n.cfg.NodeID, LockEpoch: lease.Epoch}
		fresh = true
		return nil
	})
	return d, fresh, err
}

// issue pushes the decision's commands, fenced by the lock: promote to the new primary,
// REPLICAOF to every other live node, each stored once however often a failover is resumed.
// Each target is notified when the transaction commits.
func (n *Node) issue(ctx context.Context, lease lock.Lease, d Decision) (int, error) {
	sent := 0
	err := n.inTx(ctx, func(tx pgx.Tx) error {
		sent = 0
		if err := n.locker.Fence(ctx, tx, lease); err != nil {
			return err
		}
		shard, err := n.q.FailoverShardShare(ctx, tx, n.cfg.Shard)
		if err != nil {
			return err
		}
		if shard.Epoch != d.Epoch || shard.PrimaryID != d.NewPrimary {
			return fmt.Errorf("decision of epoch %d superseded by epoch %d", d.Epoch, shard.Epoch)
		}
		addr := ""
		if live, err := n.q.FailoverNodeLive(ctx, tx, db.FailoverNodeLiveParams{NodeID: d.NewPrimary, WindowMs: n.cfg.Patience.Milliseconds()}); err == nil {
			addr = live.Address
		}
		nodes, err := n.q.FailoverLiveNodes(ctx, tx, db.FailoverLiveNodesParams{Shard: n.cfg.Shard, WindowMs: n.cfg.Patience.Milliseconds()})
		if err != nil {
			return err
		}
		push := func(node, kind string) error {
			k, err := n.q.FailoverCommandIssue(ctx, tx, db.FailoverCommandIssueParams{NodeID: node, Shard: n.cfg.Shard, Epoch: d.Epoch,
				Kind: kind, PrimaryID: d.NewPrimary, PrimaryAddress: addr, IssuedBy: n.cfg.NodeID})
			if err != nil {
				return err
			}
			sent += int(k)
			return n.q.FailoverCommandNotify(ctx, tx, node)
		}
		if err := push(d.NewPrimary, KindPromote); err != nil {
			return err
		}
		for _, nd := range nodes {
			if nd.NodeID != d.NewPrimary {
				if err := push(nd.NodeID, KindReplicaOf); err != nil {
					return err
				}
			}
		}
		return nil
	})
	return sent, err
}

// awaitPrimary polls until the new primary's row for the decision's epoch exists (it
// consumed its promote command) or ConfirmTimeout passes.
func (n *Node) awaitPrimary(ctx context.Context, d Decision) (bool, error) {
	deadline := time.Now().Add(n.cfg.ConfirmTimeout)
	t := time.NewTicker(max(n.cfg.HeartbeatInterval/4, 10*time.Millisecond))
	defer t.Stop()
	for {
		r, err := n.q.FailoverPrimaryRole(ctx, n.db, db.FailoverPrimaryRoleParams{Shard: d.Shard, Epoch: d.Epoch})
		switch {
		case err == nil:
			return r.NodeID == d.NewPrimary, nil
		case !pgdb.NoRows(err):
			return false, err
		case !time.Now().Before(deadline):
			return false, nil
		}
		select {
		case <-ctx.Done():
			return false, context.Cause(ctx)
		case <-t.C:
		}
	}
}

// complete marks the decision completed and, as the source design does, deletes the old
// primary's record if it is still silent (it writes a new one if it comes back).
func (n *Node) complete(ctx context.Context, lease lock.Lease, d Decision) error {
	return n.inTx(ctx, func(tx pgx.Tx) error {
		if err := n.locker.Fence(ctx, tx, lease); err != nil {
			return err
		}
		if _, err := n.q.FailoverDecisionComplete(ctx, tx, db.FailoverDecisionCompleteParams{Shard: d.Shard, Epoch: d.Epoch, By: n.cfg.NodeID}); err != nil {
			return err
		}
		_, err := n.q.FailoverNodeDeleteStale(ctx, tx, db.FailoverNodeDeleteStaleParams{NodeID: d.OldPrimary, WindowMs: n.cfg.Patience.Milliseconds()})
		return err
	})
}
