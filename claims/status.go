package claims

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/batchclaim/batchclaim/internal/db"
	"github.com/batchclaim/batchclaim/pgdb"
)

// InstanceStatus is one registered instance as `status` shows it.
type InstanceStatus struct {
	ID                  uuid.UUID `json:"id"`
	Name                string    `json:"name"`
	Host                string    `json:"host"`
	Version             string    `json:"version"`
	StartedAt           time.Time `json:"started_at"`
	HeartbeatAt         time.Time `json:"heartbeat_at"`
	HeartbeatAgeSeconds float64   `json:"heartbeat_age_seconds"`
	Expiry1             time.Time `json:"expiry_1"`
	Expiry2             time.Time `json:"expiry_2"`
	Phase               string    `json:"phase"` // live | expiry_1_passed | expired
	Claims              int64     `json:"claims"`
}

// ClaimStatus is one claim with its effective expiries (its claimant's lease).
type ClaimStatus struct {
	ServiceID       string     `json:"service_id"`
	Claimant        *uuid.UUID `json:"claimant,omitempty"`
	ClaimantName    string     `json:"claimant_name,omitempty"`
	Epoch           int64      `json:"epoch"`
	ClaimedAt       *time.Time `json:"claimed_at,omitempty"`
	RenewedAt       *time.Time `json:"renewed_at,omitempty"`
	Expiry1         *time.Time `json:"expiry_1,omitempty"`
	Expiry2         *time.Time `json:"expiry_2,omitempty"`
	SubmittingSince *time.Time `json:"submitting_since,omitempty"`
	// Busy: the owner has a POST in flight (its head batch is INFLIGHT under this claim), or
	// a user of the engine alone marked it with BeginSubmission. A busy claim is kept past
	// expiry_1, until expiry_2.
	Busy  bool   `json:"busy"`
	Phase string `json:"phase"` // free | held | held_busy | expired
}

// Snapshot is the claim engine's view of the whole fleet.
type Snapshot struct {
	Instances  []InstanceStatus `json:"instances"`
	ServiceIDs int64            `json:"service_ids"`
	Unclaimed  int64            `json:"unclaimed"`
	Claims     []ClaimStatus    `json:"claims,omitempty"`
}

// ReadSnapshot reads the registry and the claims. maxClaims bounds the per-claim list (0
// leaves it out, negative lists every claim).
func ReadSnapshot(ctx context.Context, q pgdb.Querier, maxClaims int) (Snapshot, error) {
	qs := db.New()
	var s Snapshot
	insts, err := qs.InstancesStatus(ctx, q)
	if err != nil {
		return s, fmt.Errorf("read instances: %w", err)
	}
	for _, i := range insts {
		s.Instances = append(s.Instances, InstanceStatus{
			ID: i.ID, Name: i.Name, Host: i.Host, Version: i.Version, StartedAt: i.StartedAt,
			HeartbeatAt: i.HeartbeatAt, HeartbeatAgeSeconds: i.HeartbeatAgeSeconds,
			Expiry1: i.Expiry1, Expiry2: i.Expiry2, Claims: i.Claims,
			Phase: leasePhase(i.HeartbeatAt, i.HeartbeatAgeSeconds, i.Expiry1, i.Expiry2),
		})
	}
	c, err := qs.ClaimsCensus(ctx, q)
	if err != nil {
		return s, fmt.Errorf("count claims: %w", err)
	}
	s.ServiceIDs, s.Unclaimed = c.ServiceIds, c.Free
	if maxClaims == 0 {
		return s, nil
	}
	var limit *int32
	if maxClaims > 0 {
		m := int32(maxClaims)
		limit = &m
	}
	rows, err := qs.ClaimsEffective(ctx, q, limit)
	if err != nil {
		return s, fmt.Errorf("read claims: %w", err)
	}
	for _, r := range rows {
		s.Claims = append(s.Claims, ClaimStatus{
			ServiceID: r.ServiceID, Claimant: r.Claimant, ClaimantName: deref(r.ClaimantName), Epoch: r.Epoch,
			ClaimedAt: r.ClaimedAt, RenewedAt: r.RenewedAt, Expiry1: r.Expiry1, Expiry2: r.Expiry2,
			SubmittingSince: r.SubmittingSince, Busy: r.Busy != nil && *r.Busy, Phase: r.Phase,
		})
	}
	return s, nil
}

// leasePhase names where an instance's lease is, from the heartbeat's age (database clock).
func leasePhase(hb time.Time, ageSeconds float64, e1, e2 time.Time) string {
	now := hb.Add(time.Duration(ageSeconds * float64(time.Second)))
	switch {
	case now.Before(e1):
		return "live"
	case now.Before(e2):
		return "expiry_1_passed"
	default:
		return "expired"
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
