package observer

import (
	"context"
	"fmt"
	"time"

	"github.com/batchclaim/batchclaim/claims"
	"github.com/batchclaim/batchclaim/internal/db"
	"github.com/batchclaim/batchclaim/internal/pg"
)

// Halt is a service_id stopped after an INVALID batch (RecorderConfig.HaltOnInvalid).
type Halt struct {
	ServiceID string    `json:"service_id"`
	Seq       int64     `json:"seq"` // the INVALID batch that halted it
	Reason    string    `json:"reason"`
	At        time.Time `json:"at"` // database clock
}

// Halts lists the halted service_ids, by service_id.
func Halts(ctx context.Context, q claims.Querier) ([]Halt, error) {
	rows, err := db.New().ServiceHalts(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("read halted services: %w", err)
	}
	out := make([]Halt, 0, len(rows))
	for _, r := range rows {
		out = append(out, Halt{ServiceID: r.ServiceID, Seq: r.Seq, Reason: r.Reason, At: r.At})
	}
	return out, nil
}

// Resume lifts the halt of serviceID: whichever instance holds its claim sends its next
// batch from its next cycle on. The INVALID batch stays INVALID. It returns the lifted halt,
// or batchclaim.ErrNotFound if serviceID was not halted.
func Resume(ctx context.Context, q claims.Querier, serviceID string) (Halt, error) {
	r, err := db.New().ServiceHaltDelete(ctx, q, serviceID)
	if err != nil {
		return Halt{}, fmt.Errorf("resume %q: %w", serviceID, pg.NotFound(err))
	}
	return Halt{ServiceID: r.ServiceID, Seq: r.Seq, Reason: r.Reason, At: r.At}, nil
}
