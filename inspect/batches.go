package inspect

import (
	"context"
	"fmt"
	"sort"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/internal/db"
	"github.com/batchclaim/batchclaim/observer"
	"github.com/batchclaim/batchclaim/pgdb"
)

// StateCounts is a number of batches per state, keyed by the state's name
// (batchclaim.State). A state with no batches is absent.
type StateCounts map[string]int64

// Total is the number of batches in every state.
func (c StateCounts) Total() int64 {
	var n int64
	for _, v := range c {
		n += v
	}
	return n
}

// Finished is the number of batches in a terminal state (batchclaim.State.Terminal).
func (c StateCounts) Finished() int64 {
	var n int64
	for st, v := range c {
		if batchclaim.State(st).Terminal() {
			n += v
		}
	}
	return n
}

// Totals counts the batches of every service_id by state.
func Totals(ctx context.Context, q pgdb.Querier) (StateCounts, error) {
	rows, err := db.New().BatchStateTotals(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("count batches: %w", err)
	}
	out := StateCounts{}
	for _, r := range rows {
		out[r.State] = r.Batches
	}
	return out, nil
}

// BatchStatus is the batches by state, the service_ids with unfinished batches and the halted
// service_ids: the batch part of `batchclaim status`.
type BatchStatus struct {
	ByState StateCounts `json:"by_state"`
	// OldestOpenSeconds is the age of the oldest unfinished batch (0: none), by the database
	// clock.
	OldestOpenSeconds float64 `json:"oldest_open_seconds"`
	// OpenServices is the number of service_ids with unfinished batches; Services lists at
	// most the number asked for of them.
	OpenServices int `json:"open_services"`
	// Services are service_ids with unfinished batches, the oldest unfinished batch first.
	Services []ServiceStatus `json:"services"`
	// Halted are the halted service_ids, by service_id.
	Halted []observer.Halt `json:"halted"`
}

// ServiceStatus is one service_id's batches by state.
type ServiceStatus struct {
	ServiceID string      `json:"service_id"`
	ByState   StateCounts `json:"by_state"`
	// OldestOpenSeconds is the age of its oldest unfinished batch (0: none).
	OldestOpenSeconds float64 `json:"oldest_open_seconds"`
}

// Batches reads the batches by state, up to maxServices of the service_ids with unfinished
// batches (-1: all) and the halted service_ids.
func Batches(ctx context.Context, q pgdb.Querier, maxServices int) (BatchStatus, error) {
	rows, err := db.New().BatchStateCounts(ctx, q)
	if err != nil {
		return BatchStatus{}, fmt.Errorf("count batches: %w", err)
	}
	out := BatchStatus{ByState: StateCounts{}, Services: []ServiceStatus{}}
	per := map[string]*ServiceStatus{}
	var order []string
	for _, r := range rows {
		out.ByState[r.State] += r.Batches
		s := per[r.ServiceID]
		if s == nil {
			s = &ServiceStatus{ServiceID: r.ServiceID, ByState: StateCounts{}}
			per[r.ServiceID] = s
			order = append(order, r.ServiceID)
		}
		s.ByState[r.State] = r.Batches
		s.OldestOpenSeconds = max(s.OldestOpenSeconds, r.OldestOpenSeconds)
	}
	var open []ServiceStatus
	for _, id := range order {
		if s := per[id]; s.OldestOpenSeconds > 0 {
			open = append(open, *s)
			out.OldestOpenSeconds = max(out.OldestOpenSeconds, s.OldestOpenSeconds)
		}
	}
	sort.Slice(open, func(i, j int) bool { return open[i].OldestOpenSeconds > open[j].OldestOpenSeconds })
	out.OpenServices = len(open)
	if maxServices >= 0 && len(open) > maxServices {
		open = open[:maxServices]
	}
	out.Services = append(out.Services, open...)
	if out.Halted, err = observer.Halts(ctx, q); err != nil {
		return BatchStatus{}, err
	}
	return out, nil
}

// KindStatus is one kind of typed jobs (package jobs) with its jobs by state.
type KindStatus struct {
	Kind    string      `json:"kind"`
	ByState StateCounts `json:"by_state"`
}

// Kinds counts the jobs stored with a kind, by kind (in order) and state. Batches without a
// kind (ledger batches, plain jobs) are not counted.
func Kinds(ctx context.Context, q pgdb.Querier) ([]KindStatus, error) {
	rows, err := db.New().BatchKindCounts(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("count jobs by kind: %w", err)
	}
	out := []KindStatus{}
	for _, r := range rows {
		if len(out) == 0 || out[len(out)-1].Kind != r.Kind {
			out = append(out, KindStatus{Kind: r.Kind, ByState: StateCounts{}})
		}
		out[len(out)-1].ByState[r.State] = r.Batches
	}
	return out, nil
}
