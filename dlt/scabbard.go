package dlt

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/batchclaim/batchclaim"
)

// ScabbardProtocolVersion is the SplinterProtocolVersion header the client sends.
const ScabbardProtocolVersion = "1"

// Scabbard is a Client of a Splinter scabbard service.
type Scabbard struct {
	t                *transport
	circuit, service string
}

// NewScabbard returns a client of service cfg.Service on circuit cfg.Circuit of the node at
// cfg.URL. It does no I/O.
func NewScabbard(cfg ScabbardConfig) (*Scabbard, error) {
	if err := checkScabbardNames(cfg.Circuit, cfg.Service); err != nil {
		return nil, fmt.Errorf("dlt config: %w", err)
	}
	t, err := newTransport(transportConfig{
		url: cfg.URL, authorization: cfg.Authorization, httpClient: cfg.HTTPClient, idleConns: cfg.IdleConns,
		timeout: cfg.RequestTimeout, concurrency: cfg.StatusConcurrency, logger: cfg.Logger,
		headers: map[string]string{"SplinterProtocolVersion": ScabbardProtocolVersion},
	})
	if err != nil {
		return nil, err
	}
	return &Scabbard{t: t, circuit: cfg.Circuit, service: cfg.Service}, nil
}

// Flavor returns FlavorScabbard.
func (s *Scabbard) Flavor() Flavor { return FlavorScabbard }

// OrderedOnValid returns false. A VALID batch has been executed but not committed, and
// scabbard keeps it only in memory: a node restart forgets it, while the next batch, if it was
// already sent, can commit first. Only COMMITTED fixes a batch's place.
func (s *Scabbard) OrderedOnValid() bool { return false }

// Post sends a BatchList to {node}/scabbard/{circuit}/{service}/batches.
func (s *Scabbard) Post(ctx context.Context, batchList []byte) (PostResult, error) {
	if _, err := SplitBatchList(batchList); err != nil {
		return PostResult{}, fmt.Errorf("post batches: %w", err)
	}
	return s.t.post(ctx, s.t.endpoint("scabbard", s.circuit, s.service, "batches"), batchList, scabbardDetail)
}

// Submit posts b.Payload, a BatchList, and returns the classified answer (see Post).
func (s *Scabbard) Submit(ctx context.Context, b batchclaim.Batch) (batchclaim.Result, error) {
	res, err := s.Post(ctx, b.Payload)
	if err != nil {
		return batchclaim.Result{}, err
	}
	return res.Result, nil
}

// Statuses asks {node}/scabbard/{circuit}/{service}/batch_statuses about at most 50 ids at
// a time.
func (s *Scabbard) Statuses(ctx context.Context, ids []string) ([]batchclaim.LedgerStatus, error) {
	return s.t.statuses(ctx, ids, 0, ScabbardMaxStatusIDs, s.fetch)
}

// StatusesWait asks .../batch_statuses?ids=...&wait=N about at most 50 ids at a time; the
// service answers once each of them is COMMITTED or INVALID or N seconds have passed.
func (s *Scabbard) StatusesWait(ctx context.Context, ids []string, wait time.Duration) ([]batchclaim.LedgerStatus, error) {
	return s.t.statuses(ctx, ids, wait, ScabbardMaxStatusIDs, s.fetch)
}

type scabbardStatus struct {
	ID     string `json:"id"`
	Status struct {
		StatusType string `json:"statusType"`
		Message    []struct {
			TransactionID string    `json:"transaction_id"`
			ErrorMessage  string    `json:"error_message"`
			ErrorData     flexBytes `json:"error_data"`
		} `json:"message"`
	} `json:"status"`
}

func (s *Scabbard) fetch(ctx context.Context, ids []string, wait int) ([]batchclaim.LedgerStatus, error) {
	target := s.t.endpoint("scabbard", s.circuit, s.service, "batch_statuses") + "?ids=" + strings.Join(ids, ",") + waitParam(wait)
	var ans []scabbardStatus
	if err := s.t.getJSON(ctx, target, wait, &ans, scabbardDetail); err != nil {
		return nil, err
	}
	out := make([]batchclaim.LedgerStatus, 0, len(ans))
	for _, a := range ans {
		st, err := parseScabbardStatus(a.Status.StatusType)
		if err != nil {
			return nil, fmt.Errorf("batch %s: %w", a.ID, err)
		}
		bs := batchclaim.LedgerStatus{ID: a.ID, Status: st}
		if st == batchclaim.StatusInvalid {
			for _, m := range a.Status.Message {
				bs.Invalid = append(bs.Invalid, batchclaim.InvalidTransaction{ID: m.TransactionID, Message: m.ErrorMessage, ExtendedData: m.ErrorData})
			}
		}
		out = append(out, bs)
	}
	return out, nil
}

func parseScabbardStatus(s string) (batchclaim.Status, error) {
	switch s {
	case "Unknown":
		return batchclaim.StatusUnknown, nil
	case "Pending":
		return batchclaim.StatusPending, nil
	case "Invalid":
		return batchclaim.StatusInvalid, nil
	case "Valid":
		return batchclaim.StatusValid, nil
	case "Committed":
		return batchclaim.StatusCommitted, nil
	}
	return "", fmt.Errorf("unknown scabbard status type %q", s)
}

// scabbardDetail reads {"code": "400", "message": "..."}.
func scabbardDetail(code int, body []byte) string {
	var v struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(body, &v) != nil || v.Message == "" {
		return bodyExcerpt(code, body)
	}
	return v.Message
}
