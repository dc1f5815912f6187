package dlt

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/batchclaim/batchclaim"
)

// Sawtooth is a Client of the Sawtooth REST API.
type Sawtooth struct {
	t *transport
}

// NewSawtooth returns a client of the REST API at cfg.URL. It does no I/O.
func NewSawtooth(cfg SawtoothConfig) (*Sawtooth, error) {
	t, err := newTransport(transportConfig{
		url: cfg.URL, authorization: cfg.Authorization, httpClient: cfg.HTTPClient, idleConns: cfg.IdleConns,
		timeout: cfg.RequestTimeout, concurrency: cfg.StatusConcurrency, logger: cfg.Logger,
	})
	if err != nil {
		return nil, err
	}
	return &Sawtooth{t: t}, nil
}

// Flavor returns FlavorSawtooth.
func (s *Sawtooth) Flavor() Flavor { return FlavorSawtooth }

// OrderedOnValid returns false: Sawtooth never reports VALID.
func (s *Sawtooth) OrderedOnValid() bool { return false }

// Post sends a BatchList to POST /batches.
func (s *Sawtooth) Post(ctx context.Context, batchList []byte) (PostResult, error) {
	if _, err := SplitBatchList(batchList); err != nil {
		return PostResult{}, fmt.Errorf("post batches: %w", err)
	}
	return s.t.post(ctx, s.t.endpoint("batches"), batchList, sawtoothDetail)
}

// Submit posts b.Payload, a BatchList, and returns the classified answer (see Post).
func (s *Sawtooth) Submit(ctx context.Context, b batchclaim.Batch) (batchclaim.Result, error) {
	res, err := s.Post(ctx, b.Payload)
	if err != nil {
		return batchclaim.Result{}, err
	}
	return res.Result, nil
}

// Statuses asks GET /batch_statuses about at most 15 ids at a time.
func (s *Sawtooth) Statuses(ctx context.Context, ids []string) ([]batchclaim.LedgerStatus, error) {
	return s.t.statuses(ctx, ids, 0, SawtoothMaxStatusIDs, s.fetch)
}

// StatusesWait asks GET /batch_statuses?id=...&wait=N about at most 15 ids at a time; the
// REST API answers once none of them is PENDING or N seconds have passed.
func (s *Sawtooth) StatusesWait(ctx context.Context, ids []string, wait time.Duration) ([]batchclaim.LedgerStatus, error) {
	return s.t.statuses(ctx, ids, wait, SawtoothMaxStatusIDs, s.fetch)
}

type sawtoothStatuses struct {
	Data []struct {
		ID                  string `json:"id"`
		Status              string `json:"status"`
		InvalidTransactions []struct {
			ID           string    `json:"id"`
			Message      string    `json:"message"`
			ExtendedData flexBytes `json:"extended_data"`
		} `json:"invalid_transactions"`
	} `json:"data"`
}

func (s *Sawtooth) fetch(ctx context.Context, ids []string, wait int) ([]batchclaim.LedgerStatus, error) {
	target := s.t.endpoint("batch_statuses") + "?id=" + strings.Join(ids, ",") + waitParam(wait)
	var ans sawtoothStatuses
	if err := s.t.getJSON(ctx, target, wait, &ans, sawtoothDetail); err != nil {
		return nil, err
	}
	out := make([]batchclaim.LedgerStatus, 0, len(ans.Data))
	for _, d := range ans.Data {
		st, err := sawtoothStatus(d.Status)
		if err != nil {
			return nil, fmt.Errorf("batch %s: %w", d.ID, err)
		}
		bs := batchclaim.LedgerStatus{ID: d.ID, Status: st}
		for _, it := range d.InvalidTransactions {
			bs.Invalid = append(bs.Invalid, batchclaim.InvalidTransaction{ID: it.ID, Message: it.Message, ExtendedData: it.ExtendedData})
		}
		out = append(out, bs)
	}
	return out, nil
}

func sawtoothStatus(s string) (batchclaim.Status, error) {
	switch st := batchclaim.Status(s); st {
	case batchclaim.StatusPending, batchclaim.StatusInvalid, batchclaim.StatusCommitted, batchclaim.StatusUnknown:
		return st, nil
	}
	return "", fmt.Errorf("unknown sawtooth status %q", s)
}

// sawtoothDetail reads {"error": {"code", "title", "message"}}.
func sawtoothDetail(code int, body []byte) string {
	var v struct {
		Error *struct {
			Code    int    `json:"code"`
			Title   string `json:"title"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &v) != nil || v.Error == nil {
		return bodyExcerpt(code, body)
	}
	return fmt.Sprintf("code %d: %s: %s", v.Error.Code, v.Error.Title, v.Error.Message)
}
