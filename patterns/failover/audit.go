package failover

import (
	"context"
	"fmt"
	"time"

	dbq "github.com/batchclaim/batchclaim/internal/db"
	"github.com/batchclaim/batchclaim/patterns/lock"
	"github.com/batchclaim/batchclaim/pgdb"
)

// Audit is what Check finds in a shard's recorded history. The four violation counters are
// zero when the failover's guarantees held.
type Audit struct {
	// TwoPrimaries counts pairs of primary terms of different nodes that overlap in database
	// time. A term runs from the node's primary row until its lease ran out or the node wrote
	// its next role row, whichever came first.
	TwoPrimaries int `json:"two_primaries"`
	// NotMostUpToDate counts decisions whose new primary was not live, or was passed by a
	// live node with higher progress, judged from the registrations the deciding transaction
	// copied.
	NotMostUpToDate int `json:"not_most_up_to_date"`
	// OrphanedFailovers counts acquisitions of the failover lock that their holder never
	// released, that are no longer valid, and after which no decision was ever completed.
	OrphanedFailovers int `json:"orphaned_failovers"`
	// LostCommands counts commands never consumed whose target is live.
	LostCommands int `json:"lost_commands"`

	Decisions        int    `json:"decisions"`
	Completed        int    `json:"decisions_completed"`
	Resumed          int    `json:"decisions_completed_by_another_node"`
	LockAcquisitions int    `json:"lock_acquisitions"`
	LockExpired      int    `json:"lock_acquisitions_expired"`
	CommandsIssued   int64  `json:"commands_issued"`
	CommandsConsumed int64  `json:"commands_consumed"`
	Epoch            int64  `json:"epoch"`
	Primary          string `json:"primary"`
}

// Violations is the sum of the four violation counters.
func (a Audit) Violations() int {
	return a.TwoPrimaries + a.NotMostUpToDate + a.OrphanedFailovers + a.LostCommands
}

// Check audits a shard's history in db. liveWindow says how recent a registration must be
// for its node to count as live (use the nodes' Patience).
func Check(ctx context.Context, db pgdb.DB, shard string, liveWindow time.Duration) (Audit, error) {
	var a Audit
	if err := db.Err(); err != nil {
		return a, fmt.Errorf("failover: %w", err)
	}
	dq := dbq.New()
	win := liveWindow.Milliseconds()
	n, err := dq.FailoverAuditTwoPrimaries(ctx, db, shard)
	if err != nil {
		return a, fmt.Errorf("audit two primaries: %w", err)
	}
	a.TwoPrimaries = int(n)
	if n, err = dq.FailoverAuditNotMostUpToDate(ctx, db, shard); err != nil {
		return a, fmt.Errorf("audit choice: %w", err)
	}
	a.NotMostUpToDate = int(n)
	if n, err = dq.FailoverAuditLostCommands(ctx, db, dbq.FailoverAuditLostCommandsParams{Shard: shard, WindowMs: win}); err != nil {
		return a, fmt.Errorf("audit commands: %w", err)
	}
	a.LostCommands = int(n)
	counts, err := dq.FailoverCommandCounts(ctx, db, shard)
	if err != nil {
		return a, fmt.Errorf("audit commands: %w", err)
	}
	a.CommandsIssued, a.CommandsConsumed = counts.Issued, counts.Consumed
	if s, err := Shard(ctx, db, shard); err == nil {
		a.Epoch, a.Primary = s.Epoch, s.PrimaryID
	}
	decisions, err := Decisions(ctx, db, shard)
	if err != nil {
		return a, fmt.Errorf("audit decisions: %w", err)
	}
	var completions []time.Time
	for _, d := range decisions {
		a.Decisions++
		if d.Outcome == DecisionCompleted && d.CompletedAt != nil {
			a.Completed++
			completions = append(completions, *d.CompletedAt)
			if d.CompletedBy != "" && d.CompletedBy != d.DecidedBy {
				a.Resumed++
			}
		}
	}
	locker, err := lock.New(db, lock.Config{})
	if err != nil {
		return a, err
	}
	acqs, err := locker.History(ctx, LockName(shard))
	if err != nil {
		return a, fmt.Errorf("audit lock: %w", err)
	}
	cur, _ := locker.Get(ctx, LockName(shard))
	for _, acq := range acqs {
		a.LockAcquisitions++
		if acq.ReleasedAt != nil || (cur.Held && cur.Epoch == acq.Epoch) {
			continue
		}
		a.LockExpired++
		completed := false
		for _, c := range completions {
			if c.After(acq.AcquiredAt) {
				completed = true
			}
		}
		if !completed {
			a.OrphanedFailovers++
		}
	}
	return a, nil
}
