package heartbeat

import (
	"context"
	"fmt"
	"sort"

	"github.com/batchclaim/batchclaim/internal/db"
	"github.com/batchclaim/batchclaim/pgdb"
)

// AuditWriters checks every stored event against the election's history of role and returns
// the events written by an instance that was not the active one at that database instant:
// for each event, the last election record (elected or resigned) at or before its written_at
// must be this very term's election (same epoch, same instance). The election records a new
// term only after every transaction fenced on the previous one has committed, and an
// instance learns it was elected only after its record is committed, so in a correct run
// the list is empty. It is what `batchclaim heartbeat demo` counts as raised_by_standby. q is
// the pgdb.DB of the instances (or a transaction of the caller's moved into its schema by
// DB.In).
func AuditWriters(ctx context.Context, q pgdb.Querier, role string) ([]Event, error) {
	hist, err := db.New().HeartbeatTermHistory(ctx, q, role)
	if err != nil {
		return nil, fmt.Errorf("audit writers: read election history: %w", err)
	}
	var bad []Event
	var after int64
	for {
		es, err := ListEvents(ctx, q, after, 1000)
		if err != nil {
			return nil, fmt.Errorf("audit writers: %w", err)
		}
		if len(es) == 0 {
			return bad, nil
		}
		for _, e := range es {
			// The last record at or before written_at.
			i := sort.Search(len(hist), func(i int) bool { return hist[i].At.After(e.WrittenAt) }) - 1
			if i < 0 || hist[i].Event != "elected" || hist[i].Epoch != e.TermEpoch || hist[i].InstanceID != e.InstanceID {
				bad = append(bad, e)
			}
		}
		after = es[len(es)-1].ID
	}
}
