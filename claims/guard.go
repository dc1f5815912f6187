package claims

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// The failover guard. The guarantees hold across a failover only if what was committed on the
// old primary is on the new one (a synchronous standby). When the database the instance
// reaches changes timeline, the guard checks that what this instance committed before is
// there: the lease renewal it last saw commit, and an epoch sequence no lower than the
// highest epoch it was granted. If not, the failover lost commits (an asynchronous standby
// was promoted) and epochs could be granted twice: the instance stops taking new work for
// good (Refusal says why), moves the epoch sequence past the epochs it knows were granted,
// and keeps renewing its lease so that no other instance takes its claims as expired. With
// Config.RequireSyncStandby it also stops taking new work while the primary commits without
// waiting for a synchronous standby, and goes on once one is back.
//
// The check is one statement. It runs at the start of every claim cycle (before anything
// could be acquired) and before every renewal through the pool; the lease loop, on a
// connection of its own, runs it once per connection (a timeline cannot change under an open
// connection to a primary: promotion happens on another server, and a demoted primary ends
// its sessions) and then every Expiry1 for the synchronous standby. A renewal never goes
// ahead of a check that could not run: on a new primary it would hide the renewal that was
// lost.

// guard is the engine's failover guard state.
type guard struct {
	mu       sync.Mutex
	timeline int64     // the database's timeline when last checked; 0: not yet
	renewed  time.Time // heartbeat_at of the last renewal seen to commit
	maxEpoch int64     // the highest epoch this instance was granted
	lost     string    // why commits were lost; permanent
	noSync   string    // why the primary has no synchronous standby; cleared when one is back
	conn     *pgx.Conn // the lease connection last checked
	syncAt   time.Time // monotonic: when the synchronous standby was last checked
	refusals int64     // times the instance began to refuse new work
}

// Refusal says why the instance takes no new work after a failover or without a synchronous
// standby; empty when it does.
func (e *Engine) Refusal() string {
	e.guard.mu.Lock()
	defer e.guard.mu.Unlock()
	return e.refusalLocked()
}

func (e *Engine) refusalLocked() string {
	switch {
	case e.guard.lost != "":
		return e.guard.lost
	case e.guard.noSync != "":
		return e.guard.noSync
	}
	return ""
}

// Refusals counts the times the instance began to refuse new work (see Refusal).
func (e *Engine) Refusals() int64 {
	e.guard.mu.Lock()
	defer e.guard.mu.Unlock()
	return e.guard.refusals
}

// granted notes epochs this instance was granted.
func (e *Engine) granted(claims []Claim) {
	e.guard.mu.Lock()
	defer e.guard.mu.Unlock()
	for _, c := range claims {
		e.guard.maxEpoch = max(e.guard.maxEpoch, c.Epoch)
	}
}

// renewedAt notes the heartbeat_at a renewal committed.
func (e *Engine) renewedAt(at time.Time) {
	e.guard.mu.Lock()
	defer e.guard.mu.Unlock()
	if at.After(e.guard.renewed) {
		e.guard.renewed = at
	}
}

// checked reports whether q is the lease loop's connection, checked already, with the
// synchronous standby not due for a check.
func (e *Engine) checked(q Querier) bool {
	e.guard.mu.Lock()
	defer e.guard.mu.Unlock()
	c, ok := q.(*pgx.Conn)
	due := e.cfg.RequireSyncStandby && time.Since(e.guard.syncAt) >= e.cfg.Expiry1
	return ok && c == e.guard.conn && e.guard.timeline != 0 && !due
}

// checkFailover checks the database q reaches (see the comment at the top of this file) and
// returns Refusal. An error means the check could not run: the caller must not write (a
// renewal on a new primary before the check would hide a lost one).
func (e *Engine) checkFailover(ctx context.Context, q Querier) (string, error) {
	if e.checked(q) {
		return e.Refusal(), nil
	}
	var timeline, epochs int64
	var sync bool
	var heartbeat *time.Time
	err := q.QueryRow(ctx, `SELECT ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::bigint,
		current_setting('synchronous_standby_names') <> '' AND current_setting('synchronous_commit') NOT IN ('off', 'local'),
		(SELECT last_value FROM service_id_claim_epochs),
		(SELECT heartbeat_at FROM instances WHERE id = $1 AND nonce = $2)`, e.cfg.InstanceID, e.nonce).Scan(&timeline, &sync, &epochs, &heartbeat)
	if err != nil {
		return "", fmt.Errorf("check the database after a possible failover: %w", err)
	}
	e.guard.mu.Lock()
	defer e.guard.mu.Unlock()
	if c, ok := q.(*pgx.Conn); ok {
		e.guard.conn = c
	}
	e.guard.syncAt = time.Now()
	if e.guard.timeline != 0 && timeline != e.guard.timeline {
		e.timelineChangedLocked(ctx, q, timeline, epochs, heartbeat)
	}
	e.guard.timeline = timeline
	switch {
	case !e.cfg.RequireSyncStandby || sync:
		if e.guard.noSync != "" {
			e.log.Info("the primary has a synchronous standby again; taking new work")
		}
		e.guard.noSync = ""
	case e.guard.noSync == "":
		e.guard.noSync = "the primary commits without waiting for a synchronous standby (synchronous_standby_names is empty or synchronous_commit is off or local), and a failover could lose what was committed; taking no new work until one is back (RequireSyncStandby)"
		e.guard.refusals++
		e.log.Error("taking no new work", "reason", e.guard.noSync)
	}
	return e.refusalLocked(), nil
}

// timelineChangedLocked checks, after a change of timeline, that this instance's last
// committed renewal and the epochs it was granted survived; e.guard.mu is held.
func (e *Engine) timelineChangedLocked(ctx context.Context, q Querier, timeline, epochs int64, heartbeat *time.Time) {
	g := &e.guard
	var why []string
	if !g.renewed.IsZero() && (heartbeat == nil || heartbeat.Before(g.renewed)) {
		seen := "missing"
		if heartbeat != nil {
			seen = heartbeat.UTC().Format(time.RFC3339Nano)
		}
		why = append(why, fmt.Sprintf("the lease renewal committed at %s is not there (the row says %s)", g.renewed.UTC().Format(time.RFC3339Nano), seen))
	}
	if epochs < g.maxEpoch {
		why = append(why, fmt.Sprintf("the epoch sequence is at %d, below epoch %d this instance was granted", epochs, g.maxEpoch))
		// No instance, this one or one started later, may grant those epochs again.
		if _, err := q.Exec(ctx, `SELECT setval('service_id_claim_epochs', GREATEST($1::bigint, (SELECT last_value FROM service_id_claim_epochs)))`, g.maxEpoch); err != nil {
			e.log.Error("could not move the epoch sequence past the epochs granted before the failover", "epoch", g.maxEpoch, "error", err)
		}
	}
	if len(why) == 0 {
		e.log.Info("the database changed timeline; what this instance committed before is there", "timeline_from", g.timeline, "timeline_to", timeline)
		return
	}
	if g.lost == "" {
		e.guard.refusals++
	}
	g.lost = fmt.Sprintf("the database changed timeline (%d to %d) and lost commits this instance saw succeed: %s; an asynchronous failover? taking no new work (restart the instances once the data is checked)",
		g.timeline, timeline, joinWhy(why))
	e.log.Error("unsafe failover detected; taking no new work", "reason", g.lost)
}

func joinWhy(why []string) string {
	out := why[0]
	for _, w := range why[1:] {
		out += "; " + w
	}
	return out
}
