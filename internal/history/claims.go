package history

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/google/uuid"

	"github.com/batchclaim/batchclaim/claims"
)

// ClaimReport is what CheckClaims found.
type ClaimReport struct {
	Acquisitions int
	Problems     []string // empty when every invariant holds
}

type claimEvent struct {
	service  string
	instance uuid.UUID
	epoch    int64
	event    string
	at       time.Time
}

// CheckClaims verifies from claim_events that every service_id had at most one owner at any
// database instant, that its epochs strictly increased over time, and that the history ends
// where the claims table is.
func CheckClaims(ctx context.Context, q claims.Querier) (ClaimReport, error) {
	var r ClaimReport
	problem := func(format string, a ...any) {
		if len(r.Problems) < 20 {
			r.Problems = append(r.Problems, fmt.Sprintf(format, a...))
		}
	}
	rows, err := q.Query(ctx, `SELECT service_id, instance_id, epoch, event, at FROM claim_events`)
	if err != nil {
		return r, err
	}
	per := map[string][]claimEvent{}
	for rows.Next() {
		var e claimEvent
		if err := rows.Scan(&e.service, &e.instance, &e.epoch, &e.event, &e.at); err != nil {
			return r, err
		}
		per[e.service] = append(per[e.service], e)
	}
	if err := rows.Err(); err != nil {
		return r, err
	}
	type owner struct {
		claimant *uuid.UUID
		epoch    int64
	}
	final := map[string]owner{}
	frows, err := q.Query(ctx, `SELECT service_id, claimant, epoch FROM service_id_claims`)
	if err != nil {
		return r, err
	}
	for frows.Next() {
		var s string
		var o owner
		if err := frows.Scan(&s, &o.claimant, &o.epoch); err != nil {
			return r, err
		}
		final[s] = o
	}
	if err := frows.Err(); err != nil {
		return r, err
	}
	for svc, evs := range per {
		sort.SliceStable(evs, func(i, j int) bool { return evs[i].at.Before(evs[j].at) })
		var cur *claimEvent
		var last int64
		for i := range evs {
			e := &evs[i]
			if e.event == "acquired" {
				r.Acquisitions++
				if cur != nil {
					problem("%s: %s acquired epoch %d while %s still owned epoch %d (two owners)", svc, e.instance, e.epoch, cur.instance, cur.epoch)
				}
				if e.epoch <= last {
					problem("%s: epoch %d acquired after epoch %d", svc, e.epoch, last)
				}
				last, cur = e.epoch, e
				continue
			}
			if cur == nil || cur.epoch != e.epoch || cur.instance != e.instance {
				problem("%s: %s of epoch %d by %s ends no open ownership", svc, e.event, e.epoch, e.instance)
			}
			cur = nil
		}
		o := final[svc]
		switch {
		case cur == nil && o.claimant != nil:
			problem("%s: history says free, table says %s", svc, o.claimant)
		case cur != nil && (o.claimant == nil || *o.claimant != cur.instance || o.epoch != cur.epoch):
			problem("%s: history says %s@%d, table says %v@%d", svc, cur.instance, cur.epoch, o.claimant, o.epoch)
		}
	}
	return r, nil
}
