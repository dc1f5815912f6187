package ingest

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/claims"
	"github.com/batchclaim/batchclaim/dlt"
	"github.com/batchclaim/batchclaim/internal/db"
)

// Stored is one batch as Enqueue left it.
type Stored struct {
	BatchID string
	Seq     int64 // its place in the service_id's order
	New     bool  // false when it was already stored (idempotent repeat)
}

// Enqueue stores one batch of serviceID with opaque payload bytes, after every batch stored
// before it for that service_id. batchID must be unique per service_id; storing the same
// (serviceID, batchID) again changes nothing. Run it in a transaction (pass a pgx.Tx) to
// store the batch atomically with other writes.
func Enqueue(ctx context.Context, q claims.Querier, serviceID, batchID string, payload []byte) (Stored, error) {
	if err := batchclaim.ValidateServiceID(serviceID); err != nil {
		return Stored{}, err
	}
	if batchID == "" {
		return Stored{}, errors.New("batch id is empty")
	}
	if err := claims.RegisterServiceIDs(ctx, q, serviceID); err != nil {
		return Stored{}, err
	}
	qs := db.New()
	row, err := qs.BatchInsert(ctx, q, db.BatchInsertParams{ServiceID: serviceID, BatchID: batchID, Payload: payload})
	if errors.Is(err, pgx.ErrNoRows) {
		old, err := qs.BatchLookup(ctx, q, db.BatchLookupParams{ServiceID: serviceID, BatchID: batchID})
		if err != nil {
			return Stored{}, fmt.Errorf("look up stored batch: %w", err)
		}
		return Stored{BatchID: batchID, Seq: old.Seq}, nil
	}
	if err != nil {
		return Stored{}, fmt.Errorf("store batch: %w", err)
	}
	return Stored{BatchID: batchID, Seq: row.Seq, New: true}, nil
}

// EnqueueBatchList stores every batch of a serialized BatchList for serviceID, in list
// order, each as a one-batch BatchList keyed by its header signature. Nothing is stored if the
// list does not decode. Pass a pgx.Tx to make the whole list atomic.
func EnqueueBatchList(ctx context.Context, q claims.Querier, serviceID string, list []byte) ([]Stored, error) {
	if err := batchclaim.ValidateServiceID(serviceID); err != nil {
		return nil, err
	}
	batches, err := dlt.SplitBatchList(list)
	if err != nil {
		return nil, err
	}
	out := make([]Stored, 0, len(batches))
	for _, b := range batches {
		s, err := Enqueue(ctx, q, serviceID, b.ID, b.List)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}
