package ui

import (
	"context"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/google/uuid"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/claims"
	"github.com/batchclaim/batchclaim/internal/db"
	"github.com/batchclaim/batchclaim/observer"
	"github.com/batchclaim/batchclaim/periodic"
	"github.com/batchclaim/batchclaim/pgdb"
)

// Status is everything the page shows, read in one go. Ages and times are by the database
// clock.
type Status struct {
	At time.Time `json:"at"`
	// Instances with their lease phase and claims (claims.ReadSnapshot).
	Instances  []claims.InstanceStatus `json:"instances"`
	ServiceIDs int64                   `json:"service_ids"`
	Unclaimed  int64                   `json:"unclaimed"`
	// FairShare is ceil(service_ids / live instances): what each live instance should hold.
	FairShare int64 `json:"fair_share"`
	// Open counts unfinished batches.
	Open Open `json:"open"`
	// Halted service_ids, which the page offers to resume.
	Halted []observer.Halt `json:"halted"`
	// Chart counts state changes per target state over the last Window, in Buckets.
	Chart Chart `json:"chart"`
	// Transitions and Takeovers are the newest first.
	Transitions []Transition `json:"transitions"`
	Takeovers   []Takeover   `json:"takeovers"`
	// Periodic lists the periodic jobs with their last tick and next run (periodic.List).
	Periodic []periodic.Status `json:"periodic"`
}

// Open is the unfinished batches: by state, and the service_ids that have any, oldest first.
type Open struct {
	ByState       map[string]int64 `json:"by_state"`
	Total         int64            `json:"total"`
	OldestSeconds float64          `json:"oldest_seconds"`
	// ServiceCount is every service_id with unfinished batches; Services lists the oldest.
	ServiceCount int       `json:"service_count"`
	Services     []Service `json:"services"`
}

// Service is one service_id with unfinished batches.
type Service struct {
	ServiceID     string           `json:"service_id"`
	ByState       map[string]int64 `json:"by_state"`
	OldestSeconds float64          `json:"oldest_seconds"`
	Owner         string           `json:"owner,omitempty"` // name of the claimant, if held
}

// Chart is state changes per target state over time. Counts[state][i] is bucket i, 0 the
// oldest; Totals sums each state over the whole window.
type Chart struct {
	WindowSeconds float64            `json:"window_seconds"`
	BucketSeconds float64            `json:"bucket_seconds"`
	Counts        map[string][]int64 `json:"counts"`
	Totals        map[string]int64   `json:"totals"`
}

// Transition is one recorded batch state change.
type Transition struct {
	At        time.Time `json:"at"`
	Seq       int64     `json:"seq"` // the batch page's key
	ServiceID string    `json:"service_id"`
	BatchID   string    `json:"batch_id"` // in full
	From      string    `json:"from,omitempty"`
	To        string    `json:"to"`
	Epoch     *int64    `json:"epoch,omitempty"`
	Instance  string    `json:"instance,omitempty"` // name, or the id of a forgotten instance
	Detail    string    `json:"detail,omitempty"`   // why, where the log says (batch page only)
}

// Takeover is a claim voided because its owner's lease ran out.
type Takeover struct {
	ID        int64     `json:"id"`
	At        time.Time `json:"at"`
	ServiceID string    `json:"service_id"`
	Epoch     int64     `json:"epoch"` // the voided owner's epoch
	Event     string    `json:"event"` // voided_idle (past expiry_1) | voided_expired (past expiry_2)
	From      string    `json:"from"`
	To        string    `json:"to,omitempty"` // who acquired it next, once someone has
	// AcquiredAfterSeconds is from the void to the next acquisition; -1 while there is none.
	AcquiredAfterSeconds float64 `json:"acquired_after_seconds"`
}

// readOptions bounds what one read returns.
type readOptions struct {
	services, recent, scan, buckets int
	window                          time.Duration
}

// readStatus reads the page's data. Each query is bounded (see queries/ui.sql).
func readStatus(ctx context.Context, q pgdb.Querier, o readOptions) (Status, error) {
	qs := db.New()
	now, err := qs.ClockNow(ctx, q)
	if err != nil {
		return Status{}, fmt.Errorf("read clock: %w", err)
	}
	snap, err := claims.ReadSnapshot(ctx, q, 0)
	if err != nil {
		return Status{}, err
	}
	st := Status{At: now, Instances: snap.Instances, ServiceIDs: snap.ServiceIDs, Unclaimed: snap.Unclaimed}
	if st.Instances == nil {
		st.Instances = []claims.InstanceStatus{}
	}
	live := 0
	for _, i := range snap.Instances {
		if i.Phase == "live" {
			live++
		}
	}
	if live > 0 {
		st.FairShare = int64(math.Ceil(float64(snap.ServiceIDs) / float64(live)))
	}
	if st.Open, err = readOpen(ctx, qs, q, o.services); err != nil {
		return Status{}, err
	}
	if st.Halted, err = observer.Halts(ctx, q); err != nil {
		return Status{}, err
	}
	if st.Chart, err = readChart(ctx, qs, q, o); err != nil {
		return Status{}, err
	}
	if st.Transitions, err = readTransitions(ctx, qs, q, o.recent); err != nil {
		return Status{}, err
	}
	if st.Takeovers, err = readTakeovers(ctx, qs, q, o); err != nil {
		return Status{}, err
	}
	if st.Periodic, err = periodic.List(ctx, q); err != nil {
		return Status{}, err
	}
	return st, nil
}

func readOpen(ctx context.Context, qs *db.Queries, q db.DBTX, limit int) (Open, error) {
	rows, err := qs.UIOpenBatches(ctx, q)
	if err != nil {
		return Open{}, fmt.Errorf("count unfinished batches: %w", err)
	}
	out := Open{ByState: map[string]int64{}, Services: []Service{}}
	per := map[string]*Service{}
	var all []*Service
	for _, r := range rows {
		out.ByState[r.State] += r.Batches
		out.Total += r.Batches
		s := per[r.ServiceID]
		if s == nil {
			s = &Service{ServiceID: r.ServiceID, ByState: map[string]int64{}}
			per[r.ServiceID] = s
			all = append(all, s)
		}
		s.ByState[r.State] = r.Batches
		s.OldestSeconds = max(s.OldestSeconds, r.OldestSeconds)
		out.OldestSeconds = max(out.OldestSeconds, r.OldestSeconds)
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].OldestSeconds > all[j].OldestSeconds })
	out.ServiceCount = len(all)
	ids := make([]string, 0, min(limit, len(all)))
	for _, s := range all[:min(limit, len(all))] {
		ids = append(ids, s.ServiceID)
	}
	owners, err := qs.UIServiceOwners(ctx, q, ids)
	if err != nil {
		return Open{}, fmt.Errorf("read owners: %w", err)
	}
	for _, o := range owners {
		per[o.ServiceID].Owner = o.Name
	}
	for _, s := range all[:min(limit, len(all))] {
		out.Services = append(out.Services, *s)
	}
	return out, nil
}

func readChart(ctx context.Context, qs *db.Queries, q db.DBTX, o readOptions) (Chart, error) {
	bucket := o.window / time.Duration(o.buckets)
	rows, err := qs.UITransitionsPerBucket(ctx, q, db.UITransitionsPerBucketParams{
		BucketMs: bucket.Milliseconds(), Scan: int64(o.scan), WindowMs: o.window.Milliseconds(),
	})
	if err != nil {
		return Chart{}, fmt.Errorf("count recent transitions: %w", err)
	}
	c := Chart{WindowSeconds: o.window.Seconds(), BucketSeconds: bucket.Seconds(), Counts: map[string][]int64{}, Totals: map[string]int64{}}
	for _, s := range batchclaim.States {
		c.Counts[string(s)] = make([]int64, o.buckets)
		c.Totals[string(s)] = 0
	}
	for _, r := range rows {
		counts, ok := c.Counts[r.ToState]
		if !ok || r.Bucket < 0 || r.Bucket >= int64(o.buckets) {
			continue
		}
		counts[int64(o.buckets)-1-r.Bucket] += r.Transitions
		c.Totals[r.ToState] += r.Transitions
	}
	return c, nil
}

func readTransitions(ctx context.Context, qs *db.Queries, q db.DBTX, limit int) ([]Transition, error) {
	rows, err := qs.UITransitionsRecent(ctx, q, int32(limit))
	if err != nil {
		return nil, fmt.Errorf("read recent transitions: %w", err)
	}
	out := make([]Transition, 0, len(rows))
	for _, r := range rows {
		out = append(out, Transition{
			At: r.At, Seq: r.Seq, ServiceID: r.ServiceID, BatchID: r.BatchID, From: deref(r.FromState), To: r.ToState,
			Epoch: r.Epoch, Instance: name(r.InstanceName, r.InstanceID),
		})
	}
	return out, nil
}

func readTakeovers(ctx context.Context, qs *db.Queries, q db.DBTX, o readOptions) ([]Takeover, error) {
	rows, err := qs.UITakeoversRecent(ctx, q, db.UITakeoversRecentParams{Scan: int32(o.scan), MaxRows: int32(o.recent)})
	if err != nil {
		return nil, fmt.Errorf("read recent takeovers: %w", err)
	}
	out := make([]Takeover, 0, len(rows))
	for _, r := range rows {
		out = append(out, Takeover{
			At: r.At, ServiceID: r.ServiceID, Epoch: r.Epoch, Event: r.Event,
			From: r.FromName, To: r.ToName, AcquiredAfterSeconds: r.AcquiredAfterSeconds,
		})
	}
	return out, nil
}

// name is an instance's name, or the start of its id once its row was pruned.
func name(n *string, id *uuid.UUID) string {
	switch {
	case n != nil:
		return *n
	case id != nil:
		return id.String()[:8]
	}
	return ""
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
