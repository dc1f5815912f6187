package inspect

import (
	"context"
	"fmt"
	"time"

	"github.com/batchclaim/batchclaim/internal/db"
	"github.com/batchclaim/batchclaim/pgdb"
)

// RetentionStatus is the retention job's last run, recorded in the database by whichever
// instance ran it (docs/operations.md, Retention).
type RetentionStatus struct {
	// Ran is false when no run was ever recorded: retention is off on every instance, or
	// none has run it yet. The other fields are then zero.
	Ran bool `json:"ran"`
	// MaxAgeSeconds is the age past which the run deleted finished batches.
	MaxAgeSeconds     float64    `json:"max_age_seconds"`
	LastRunAt         *time.Time `json:"last_run_at"`
	LastRunAgeSeconds float64    `json:"last_run_age_seconds"` // by the database clock
	// LastRunInstance is the name of the instance that ran it, or its id once it has left
	// the registry.
	LastRunInstance string `json:"last_run_instance"`
	LastRunPruned   int64  `json:"last_run_pruned"` // batches the last run deleted
	PrunedTotal     int64  `json:"pruned_total"`    // batches every run deleted
}

// Retention reads the retention job's last run.
func Retention(ctx context.Context, q pgdb.Querier) (RetentionStatus, error) {
	r, err := db.New().RetentionStatus(ctx, q)
	if pgdb.NoRows(err) {
		return RetentionStatus{}, nil
	}
	if err != nil {
		return RetentionStatus{}, fmt.Errorf("read retention: %w", err)
	}
	by := r.InstanceName
	if by == "" {
		by = r.InstanceID.String() // the instance has left the registry since
	}
	return RetentionStatus{
		Ran: true, MaxAgeSeconds: (time.Duration(r.MaxAgeMs) * time.Millisecond).Seconds(),
		LastRunAt: &r.LastRunAt, LastRunAgeSeconds: r.LastRunAgeSeconds, LastRunInstance: by,
		LastRunPruned: r.LastRunPruned, PrunedTotal: r.PrunedTotal,
	}, nil
}
