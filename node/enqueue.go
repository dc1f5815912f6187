package node

import (
	"context"

	"github.com/batchclaim/batchclaim/claims"
	"github.com/batchclaim/batchclaim/ingest"
)

// Stored is one batch (job) as Enqueue left it: its id, its place in its service_id's order,
// and whether it is new (false for a repeat of a batch already stored).
type Stored = ingest.Stored

// Enqueue stores one batch (a job, for a job runner) of serviceID with opaque payload bytes,
// after every batch of that service_id committed before it, so that the per-service order is
// the order of the commits. batchID is unique per service_id: storing the same one again
// changes nothing. Pass a pgx.Tx as q to store the batch atomically with your own writes (the
// instance holding the service_id is woken when that transaction commits); other enqueues of
// serviceID wait for it to end, so keep it short. It is ingest.Enqueue, here so that an
// embedder needs one import.
func Enqueue(ctx context.Context, q claims.Querier, serviceID, batchID string, payload []byte) (Stored, error) {
	return ingest.Enqueue(ctx, q, serviceID, batchID, payload)
}
