package node

import (
	"context"
	"encoding/json"
	"time"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/dlt"
	"github.com/batchclaim/batchclaim/observer"
	"github.com/batchclaim/batchclaim/submitter"
)

// DLTSubmitter posts batches (their payload is a BatchList) through a ledger adapter, whose
// classified answer is the submission's result.
func DLTSubmitter(c dlt.Client) submitter.Submitter {
	return submitter.SubmitterFunc(func(ctx context.Context, b batchclaim.Batch) (batchclaim.Result, error) {
		res, err := c.Post(ctx, b.Payload)
		if err != nil {
			return batchclaim.Result{}, err
		}
		return res.Result, nil
	})
}

// DLTStatuses asks a ledger adapter about batch statuses. Besides Statuses, the source it
// returns has StatusesWait(ctx, ids, wait), which asks the ledger to hold its answer until no
// id is left unsettled or wait has passed (see dlt.Client); a caller finds it through an
// interface assertion.
func DLTStatuses(c dlt.Client) observer.StatusSource { return statusSource{c} }

type statusSource struct{ c dlt.Client }

func (s statusSource) Statuses(ctx context.Context, ids []string) ([]observer.LedgerStatus, error) {
	return s.StatusesWait(ctx, ids, 0)
}

// StatusesWait is Statuses asking the ledger to answer once no id is left unsettled
// (Sawtooth: none PENDING; scabbard: each COMMITTED or INVALID) or wait, rounded up to whole
// seconds, has passed. Zero wait asks without waiting.
func (s statusSource) StatusesWait(ctx context.Context, ids []string, wait time.Duration) ([]observer.LedgerStatus, error) {
	got, err := s.c.StatusesWait(ctx, ids, wait)
	if err != nil {
		return nil, err
	}
	out := make([]observer.LedgerStatus, len(got))
	for i, g := range got {
		out[i] = observer.LedgerStatus{ID: g.ID, Status: g.Status}
		if len(g.Invalid) > 0 {
			out[i].Invalid, _ = json.Marshal(g.Invalid)
		}
	}
	return out, nil
}
