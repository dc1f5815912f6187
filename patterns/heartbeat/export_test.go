package heartbeat

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/batchclaim/batchclaim/patterns/election"
	"github.com/batchclaim/batchclaim/pgdb"
)

// FenceFunc is a hand-written fencer for tests of the monitoring step alone.
type FenceFunc func(ctx context.Context, tx pgdb.Querier, role string) error

func (f FenceFunc) Fence(ctx context.Context, tx pgdb.Querier, role string) error {
	return f(ctx, tx, role)
}

// Step runs one monitoring step as the writer (instanceID, epoch), fenced by fence, at the
// database time now (nil: now()).
func Step(ctx context.Context, pool pgdb.Beginner, fence FenceFunc, instanceID uuid.UUID, epoch int64, now *time.Time) (raised, cleared []Event, purged int64, err error) {
	m := &monitor{pool: pool, fence: fence, role: RoleDefault, txTimeout: TxTimeoutDefault}
	res, err := m.step(ctx, writer{instanceID: instanceID, epoch: epoch}, now)
	return res.Raised, res.Cleared, res.Purged, err
}

// Deliverer is the outbox deliverer for tests.
type Deliverer = deliverer

// NewDeliverer returns a deliverer with the Config's delivery settings.
func NewDeliverer(pool pgdb.Beginner, cfg Config) *Deliverer {
	cfg = cfg.withDefaults()
	return &deliverer{pool: pool, hook: cfg.OnEvent, webhookURL: cfg.WebhookURL, client: newHTTPClient(cfg),
		batch: cfg.DeliveryBatch, retryBase: cfg.RetryBase, retryMax: cfg.RetryMax, logger: cfg.Logger, stats: &stats{}}
}

// Drain delivers until nothing is due.
func (d *Deliverer) Drain(ctx context.Context) (int, error) { return d.drain(ctx) }

// RetryDelay exposes the backoff.
func (d *Deliverer) RetryDelay(failures int) time.Duration { return d.retryDelay(failures) }

// StepAs runs one monitoring step of s as if its term were t, fenced by the real election.
func (s *Service) StepAs(ctx context.Context, t election.Term) (raised, cleared []Event, err error) {
	res, err := s.monitorFor(t).step(ctx, writer{instanceID: t.InstanceID, epoch: t.Epoch}, nil)
	return res.Raised, res.Cleared, err
}
