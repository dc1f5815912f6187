package periodic

import (
	"context"
	"fmt"
	"time"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/internal/db"
	"github.com/batchclaim/batchclaim/pgdb"
)

// Status is a periodic job as the database knows it, for the status page.
type Status struct {
	Name      string `json:"name"`
	Schedule  string `json:"schedule"` // as the instance that registered it last described it
	ServiceID string `json:"service_id"`
	// LastTick is the latest tick stored (nil: none yet), LastSeq its job and LastState that
	// job's state now ("" once retention deleted it).
	LastTick  *time.Time       `json:"last_tick,omitempty"`
	LastSeq   int64            `json:"last_seq,omitempty"`
	LastState batchclaim.State `json:"last_state,omitempty"`
	// NextRun is the next tick as the instance that wrote last computed it. One in the past
	// means no instance with this job has run since (or none is configured with it any more:
	// Delete removes its row).
	NextRun   *time.Time `json:"next_run,omitempty"`
	UpdatedAt time.Time  `json:"updated_at"`
}

// List returns every periodic job registered in the database, by name.
func List(ctx context.Context, q pgdb.Querier) ([]Status, error) {
	rows, err := db.New().PeriodicList(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("read periodic jobs: %w", err)
	}
	out := make([]Status, 0, len(rows))
	for _, r := range rows {
		s := Status{Name: r.Name, Schedule: r.Schedule, ServiceID: r.ServiceID, LastTick: r.LastTick, NextRun: r.NextTick, UpdatedAt: r.UpdatedAt}
		if r.LastSeq != nil {
			s.LastSeq = *r.LastSeq
		}
		if r.LastState != nil {
			s.LastState = batchclaim.State(*r.LastState)
		}
		out = append(out, s)
	}
	return out, nil
}

// Delete removes the row of a periodic job no instance is configured with any more, so that
// the status page stops listing it; batchclaim.ErrNotFound if there is none. An instance
// still configured with it registers it again when it starts, with no tick stored: its first
// tick is then the first after that.
func Delete(ctx context.Context, q pgdb.Querier, name string) error {
	if _, err := db.New().PeriodicDelete(ctx, q, name); err != nil {
		return fmt.Errorf("delete periodic job %q: %w", name, pgdb.NotFound(err))
	}
	return nil
}
