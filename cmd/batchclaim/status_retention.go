package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/batchclaim/batchclaim/internal/db"
	"github.com/batchclaim/batchclaim/pgdb"
)

// retentionStatus is the retention part of `status`: the job's last run, recorded in the
// database by whichever instance ran it (see docs/operations.md, Retention).
type retentionStatus struct {
	// Ran is false when no run was ever recorded: retention is off on every instance, or
	// none has run it yet.
	Ran               bool       `json:"ran"`
	MaxAgeSeconds     float64    `json:"max_age_seconds"`
	LastRunAt         *time.Time `json:"last_run_at"`
	LastRunAgeSeconds float64    `json:"last_run_age_seconds"`
	LastRunInstance   string     `json:"last_run_instance"`
	LastRunPruned     int64      `json:"last_run_pruned"`
	PrunedTotal       int64      `json:"pruned_total"`
}

func readRetention(ctx context.Context, q db.DBTX) (retentionStatus, error) {
	r, err := db.New().RetentionStatus(ctx, q)
	if pgdb.NoRows(err) {
		return retentionStatus{}, nil
	}
	if err != nil {
		return retentionStatus{}, fmt.Errorf("read retention: %w", err)
	}
	by := r.InstanceName
	if by == "" {
		by = r.InstanceID.String() // the instance has left the registry since
	}
	return retentionStatus{
		Ran: true, MaxAgeSeconds: (time.Duration(r.MaxAgeMs) * time.Millisecond).Seconds(),
		LastRunAt: &r.LastRunAt, LastRunAgeSeconds: r.LastRunAgeSeconds, LastRunInstance: by,
		LastRunPruned: r.LastRunPruned, PrunedTotal: r.PrunedTotal,
	}, nil
}

func (r retentionStatus) print(w io.Writer) {
	if !r.Ran {
		fmt.Fprintln(w, "retention: no run recorded (off on every instance, or not run yet)")
		return
	}
	age := time.Duration(r.MaxAgeSeconds * float64(time.Second))
	fmt.Fprintf(w, "retention: finished batches deleted after %s; last run %.1fs ago by %s deleted %d; %d deleted in all\n",
		age, r.LastRunAgeSeconds, printable(r.LastRunInstance), r.LastRunPruned, r.PrunedTotal)
}
