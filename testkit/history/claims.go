package history

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/batchclaim/batchclaim/pgdb"
	"github.com/google/uuid"
)

// ClaimReport is what CheckClaims found.
type ClaimReport struct {
	Acquisitions int
	// DoubleOwners counts acquisitions committed while another ownership of the same
	// service_id had not ended: two valid owners at one database instant.
	DoubleOwners int
	// EpochRegressions counts acquisitions whose epoch was not larger than every earlier one
	// of the service_id (a repeated epoch too, as after an asynchronous failover).
	EpochRegressions int
	// Gaps counts histories that do not add up: an end of ownership that ends nothing, or a
	// history whose last state is not the claims table's.
	Gaps     int
	Problems []string // empty when every invariant holds
}

// Ownership is one epoch of one service_id, from its acquisition to its end.
type Ownership struct {
	Service  string
	Instance uuid.UUID
	Epoch    int64
	From     time.Time // when the acquisition committed
	To       time.Time // when the end committed; zero while still owned
	End      string    // released, surplus_released, voided_idle, voided_expired; "" while owned
}

// claimEvent is a row of claim_events with the time its transaction committed (the
// commit timestamp when the server tracks them, else the row's own clock_timestamp()).
type claimEvent struct {
	id       int64
	service  string
	instance uuid.UUID
	epoch    int64
	event    string
	at       time.Time
}

// CheckClaims verifies from claim_events that every service_id had at most one owner at any
// database instant, that its epochs strictly increased over time, and that the history ends
// where the claims table is.
func CheckClaims(ctx context.Context, q pgdb.Querier) (ClaimReport, error) {
	r, _, err := claimHistory(ctx, q, ClaimOptions{})
	return r, err
}

// ClaimOptions tell CheckClaimsWith what it cannot read from the database.
type ClaimOptions struct {
	// Deregistered maps instances that deregistered (a graceful stop deletes the instance
	// row, which frees whatever it still held without a claim event) to the database time
	// their stop began. An acquisition after that time while such an instance's ownership
	// is still open in the history is a gap (a claim freed without an event), not two
	// owners.
	Deregistered map[uuid.UUID]time.Time
}

// CheckClaimsWith is CheckClaims with what the caller knows about deregistrations.
func CheckClaimsWith(ctx context.Context, q pgdb.Querier, opts ClaimOptions) (ClaimReport, error) {
	r, _, err := claimHistory(ctx, q, opts)
	return r, err
}

// Ownerships returns every ownership of every service_id, by service_id in order.
func Ownerships(ctx context.Context, q pgdb.Querier) (map[string][]Ownership, error) {
	_, o, err := claimHistory(ctx, q, ClaimOptions{})
	return o, err
}

func claimHistory(ctx context.Context, q pgdb.Querier, opts ClaimOptions) (ClaimReport, map[string][]Ownership, error) {
	var r ClaimReport
	problem := func(counter *int, format string, a ...any) {
		*counter++
		if len(r.Problems) < 20 {
			r.Problems = append(r.Problems, fmt.Sprintf(format, a...))
		}
	}
	commitTS, err := tracksCommitTimestamps(ctx, q)
	if err != nil {
		return r, nil, err
	}
	at := "at"
	if commitTS {
		at = "COALESCE(pg_xact_commit_timestamp(xmin), at)"
	}
	rows, err := q.Query(ctx, `SELECT id, service_id, instance_id, epoch, event, `+at+` FROM batchclaim.claim_events`)
	if err != nil {
		return r, nil, fmt.Errorf("read claim events: %w", err)
	}
	per := map[string][]claimEvent{}
	for rows.Next() {
		var e claimEvent
		if err := rows.Scan(&e.id, &e.service, &e.instance, &e.epoch, &e.event, &e.at); err != nil {
			return r, nil, err
		}
		per[e.service] = append(per[e.service], e)
	}
	if err := rows.Err(); err != nil {
		return r, nil, err
	}
	type owner struct {
		claimant *uuid.UUID
		epoch    int64
	}
	final := map[string]owner{}
	frows, err := q.Query(ctx, `SELECT service_id, claimant, epoch FROM batchclaim.service_id_claims`)
	if err != nil {
		return r, nil, fmt.Errorf("read claims: %w", err)
	}
	for frows.Next() {
		var s string
		var o owner
		if err := frows.Scan(&s, &o.claimant, &o.epoch); err != nil {
			return r, nil, err
		}
		final[s] = o
	}
	if err := frows.Err(); err != nil {
		return r, nil, err
	}
	owns := map[string][]Ownership{}
	for svc, evs := range per {
		// In commit order; within one transaction (a takeover voids, then acquires) by id.
		slices.SortFunc(evs, func(a, b claimEvent) int {
			return cmp.Or(a.at.Compare(b.at), cmp.Compare(a.id, b.id))
		})
		var cur *Ownership
		var last int64
		for _, e := range evs {
			if e.event == "acquired" {
				r.Acquisitions++
				if cur != nil {
					if stop, ok := opts.Deregistered[cur.Instance]; ok && !e.at.Before(stop) {
						problem(&r.Gaps, "%s: epoch %d of %s was freed without a claim event when it deregistered (its stop began at %s; it did not release the claim); %s acquired epoch %d at %s",
							svc, cur.Epoch, cur.Instance, stop.Format(time.StampMicro), e.instance, e.epoch, e.at.Format(time.StampMicro))
					} else {
						problem(&r.DoubleOwners, "%s: %s acquired epoch %d at %s while %s still owned epoch %d (two owners)",
							svc, e.instance, e.epoch, e.at.Format(time.StampMicro), cur.Instance, cur.Epoch)
					}
					owns[svc] = append(owns[svc], *cur)
				}
				if e.epoch <= last {
					problem(&r.EpochRegressions, "%s: epoch %d acquired after epoch %d", svc, e.epoch, last)
				}
				last = max(last, e.epoch)
				cur = &Ownership{Service: svc, Instance: e.instance, Epoch: e.epoch, From: e.at}
				continue
			}
			if cur == nil || cur.Epoch != e.epoch || cur.Instance != e.instance {
				problem(&r.Gaps, "%s: %s of epoch %d by %s ends no open ownership", svc, e.event, e.epoch, e.instance)
				continue
			}
			cur.To, cur.End = e.at, e.event
			owns[svc] = append(owns[svc], *cur)
			cur = nil
		}
		if cur != nil {
			owns[svc] = append(owns[svc], *cur)
		}
		o := final[svc]
		if _, gone := opts.Deregistered[ptrOr(cur).Instance]; cur != nil && gone && o.claimant == nil {
			problem(&r.Gaps, "%s: epoch %d of %s was freed without a claim event when it deregistered (it did not release the claim)", svc, cur.Epoch, cur.Instance)
			continue
		}
		switch {
		case cur == nil && o.claimant != nil:
			problem(&r.Gaps, "%s: history says free, table says %s", svc, o.claimant)
		case cur != nil && (o.claimant == nil || *o.claimant != cur.Instance || o.epoch != cur.Epoch):
			problem(&r.Gaps, "%s: history says %s@%d, table says %v@%d", svc, cur.Instance, cur.Epoch, o.claimant, o.epoch)
		}
	}
	return r, owns, nil
}

func ptrOr(o *Ownership) Ownership {
	if o == nil {
		return Ownership{}
	}
	return *o
}

// tracksCommitTimestamps reports whether the server records when each transaction committed
// (track_commit_timestamp), which orders the history by commit rather than by statement time.
func tracksCommitTimestamps(ctx context.Context, q pgdb.Querier) (bool, error) {
	var v string
	if err := q.QueryRow(ctx, `SHOW track_commit_timestamp`).Scan(&v); err != nil {
		return false, fmt.Errorf("show track_commit_timestamp: %w", err)
	}
	return v == "on", nil
}
