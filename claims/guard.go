package claims

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batchclaim/batchclaim/internal/db"
	"github.com/batchclaim/batchclaim/pgdb"
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
// waiting for a synchronous standby, and goes on once one is back. A server on an older
// timeline than one the instance already wrote to is a former primary that still takes
// sessions (its manager died before demoting it): no new work while connected there.
//
// What the guard reads costs no statement of its own in a claim cycle: the cycle's survey
// returns it (the timeline, the synchronous standby, the epoch sequence, this instance's last
// renewal), and the cycle judges it before it writes anything. A renewal reads it with one
// statement before the first renewal on each new connection (see checkLease), and every
// Expiry1 when a synchronous standby is required.

// guard is the engine's failover guard state.
type guard struct {
	mu       sync.Mutex
	timeline int64              // the database's timeline when last checked; 0: not yet
	renewed  time.Time          // heartbeat_at of the last renewal seen to commit
	maxEpoch int64              // the highest epoch this instance was granted
	lost     string             // why commits were lost; permanent
	noSync   string             // why the primary has no synchronous standby; cleared when one is back
	stale    string             // why the server reached is a former primary; cleared when it is not
	conns    map[*pgx.Conn]bool // connections the database was judged through on this timeline
	syncAt   time.Time          // monotonic: when the synchronous standby was last checked
	refusals int64              // times the instance began to refuse new work
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
	case e.guard.stale != "":
		return e.guard.stale
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

// observation is what the guard reads from the database in one statement: the survey of a
// claim cycle, or the lease loop's own check.
type observation struct {
	timeline, epochs int64
	sync             bool
	heartbeat        *time.Time // this instance's last renewal there; nil: no row
}

// guardQuery reads an observation (the same columns as the survey's last four).
const guardQuery = `SELECT ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::bigint,
	current_setting('synchronous_standby_names') <> '' AND current_setting('synchronous_commit') NOT IN ('off', 'local'),
	COALESCE(pg_sequence_last_value('batchclaim.service_id_claim_epochs'::regclass), 0),
	(SELECT heartbeat_at FROM batchclaim.instances WHERE id = $1 AND nonce = $2)`

// checked reports whether conn is a connection the guard judged the database through since
// the last change of timeline, with the synchronous standby not due for a check.
func (e *Engine) checked(conn *pgx.Conn) bool {
	e.guard.mu.Lock()
	defer e.guard.mu.Unlock()
	due := e.cfg.RequireSyncStandby && time.Since(e.guard.syncAt) >= e.cfg.Expiry1
	return conn != nil && e.guard.conns[conn] && e.guard.timeline != 0 && !due
}

// acquirer is implemented by *pgxpool.Pool.
type acquirer interface {
	Acquire(ctx context.Context) (*pgxpool.Conn, error)
}

// checkLease pins the renewal that follows to one connection and judges the database
// through it first, unless the guard did so on that connection already (a timeline cannot
// change under an open connection to a primary: promotion happens on another server, and a
// demoted primary ends its sessions) and no check of the synchronous standby is due. It
// returns the pgdb.Querier to renew through and a func that releases it. An error means the check
// could not run, and the renewal must not go ahead: on a new primary it would hide the
// renewal that was lost.
func (e *Engine) checkLease(ctx context.Context, q pgdb.Querier) (pgdb.Querier, func(), error) {
	release := func() {}
	schema := pgdb.SchemaOf(q)
	conn, _ := pgdb.Unwrap(q).(*pgx.Conn)
	if p, ok := pgdb.Unwrap(q).(acquirer); ok {
		c, err := p.Acquire(ctx)
		if err != nil {
			return nil, release, err
		}
		q, conn, release = pgdb.QuerierInSchema(c, schema), c.Conn(), c.Release
	}
	if e.checked(conn) {
		return q, release, nil
	}
	var o observation
	if err := q.QueryRow(ctx, guardQuery, e.cfg.InstanceID, e.nonce).Scan(&o.timeline, &o.sync, &o.epochs, &o.heartbeat); err != nil {
		release()
		return nil, func() {}, fmt.Errorf("check the database after a possible failover: %w", err)
	}
	e.judge(ctx, q, o)
	if conn != nil {
		e.guard.mu.Lock()
		if len(e.guard.conns) > 64 { // connections come and go; forget the old ones
			clear(e.guard.conns)
		}
		e.guard.conns[conn] = true
		e.guard.mu.Unlock()
	}
	return q, release, nil
}

// checkSurvey judges the database from a claim cycle's survey, before the cycle writes
// anything, and returns Refusal.
func (e *Engine) checkSurvey(ctx context.Context, sv db.ClaimsSurveyRow) string {
	o := observation{timeline: sv.Timeline, epochs: sv.Epochs, sync: sv.SyncStandby}
	if sv.HeartbeatAt.After(time.Unix(0, 0)) {
		o.heartbeat = &sv.HeartbeatAt
	}
	e.judge(ctx, e.db, o)
	return e.Refusal()
}

// judge updates the guard from an observation of the database q reaches and, when the
// instance begins to refuse new work, drops its claims (refuse).
func (e *Engine) judge(ctx context.Context, q pgdb.Querier, o observation) {
	began, bump := e.judgeLocking(o)
	if bump > 0 {
		// No instance, this one or one started later, may grant those epochs again.
		bctx, cancel := context.WithTimeout(ctx, e.cfg.LocalDeadline)
		_, err := q.Exec(bctx, `SELECT setval('batchclaim.service_id_claim_epochs', GREATEST($1::bigint, (SELECT last_value FROM batchclaim.service_id_claim_epochs)))`, bump)
		cancel()
		if err != nil {
			e.log.Error("could not move the epoch sequence past the epochs granted before the failover", "epoch", bump, "error", err)
		}
	}
	if began {
		e.refuse()
	}
}

// LossRefusing: the instance began to refuse new work (Engine.Refusal); it adopts its claims
// again if the refusal ends (a synchronous standby is back).
const LossRefusing LossReason = "refusing"

// refuse drops every claim as a passed local deadline does (contexts cancelled, so in-flight
// submissions stop; losses reported), so that nothing works under them while the instance
// refuses. Its lease goes on: nobody takes the claims as expired, and a cycle after the
// refusal ended finds them still in its name and adopts them again.
func (e *Engine) refuse() {
	e.mu.Lock()
	lost := e.dropAllLocked()
	e.mu.Unlock()
	e.notifyLost(lost, LossRefusing)
}

// judgeLocking is judge's part under the guard's lock (which is never held while e.mu is
// taken: e.mu comes first). It reports whether a refusal began, and the epoch the sequence
// must be moved past (zero: none).
func (e *Engine) judgeLocking(o observation) (began bool, bump int64) {
	e.guard.mu.Lock()
	defer e.guard.mu.Unlock()
	before := e.refusalLocked()
	e.guard.syncAt = time.Now()
	if e.guard.conns == nil {
		e.guard.conns = map[*pgx.Conn]bool{}
	}
	switch {
	case e.guard.timeline != 0 && o.timeline < e.guard.timeline:
		// An older history than the one this instance already wrote to: a former primary
		// that still takes sessions (its manager died before demoting it, say). Commits there
		// wait for a standby that follows someone else, and what it says is stale: no work
		// while connected there.
		if e.guard.stale == "" {
			e.guard.refusals++
			e.guard.stale = fmt.Sprintf("reached a server on timeline %d, older than timeline %d this instance already wrote to: a former primary that still takes sessions; taking no new work while connected there", o.timeline, e.guard.timeline)
			e.log.Error("taking no new work", "reason", e.guard.stale)
		}
		return before == "" && e.refusalLocked() != "", 0
	case e.guard.timeline != 0 && o.timeline > e.guard.timeline:
		bump = e.timelineChangedLocked(o.timeline, o.epochs, o.heartbeat)
		clear(e.guard.conns)
	}
	if e.guard.stale != "" {
		e.log.Info("back on the current timeline; the former primary is no longer reached", "timeline", o.timeline)
		e.guard.stale = ""
	}
	e.guard.timeline = o.timeline
	switch {
	case !e.cfg.RequireSyncStandby || o.sync:
		if e.guard.noSync != "" {
			e.log.Info("the primary has a synchronous standby again; taking new work")
		}
		e.guard.noSync = ""
	case e.guard.noSync == "":
		e.guard.noSync = "the primary commits without waiting for a synchronous standby (synchronous_standby_names is empty or synchronous_commit is off or local), and a failover could lose what was committed; taking no new work until one is back (RequireSyncStandby)"
		e.guard.refusals++
		e.log.Error("taking no new work", "reason", e.guard.noSync)
	}
	return before == "" && e.refusalLocked() != "", bump
}

// timelineChangedLocked checks, after a change of timeline, that this instance's last
// committed renewal and the epochs it was granted survived; e.guard.mu is held. It returns the
// epoch the sequence must be moved past (zero: none).
func (e *Engine) timelineChangedLocked(timeline, epochs int64, heartbeat *time.Time) (bump int64) {
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
		bump = g.maxEpoch
	}
	if len(why) == 0 {
		e.log.Info("the database changed timeline; what this instance committed before is there", "timeline_from", g.timeline, "timeline_to", timeline)
		return 0
	}
	if g.lost == "" {
		g.refusals++
	}
	g.lost = fmt.Sprintf("the database changed timeline (%d to %d) and lost commits this instance saw succeed: %s; an asynchronous failover? taking no new work (restart the instances once the data is checked)",
		g.timeline, timeline, joinWhy(why))
	e.log.Error("unsafe failover detected; taking no new work", "reason", g.lost)
	return bump
}

func joinWhy(why []string) string {
	out := why[0]
	for _, w := range why[1:] {
		out += "; " + w
	}
	return out
}
