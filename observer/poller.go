package observer

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/claims"
	"github.com/batchclaim/batchclaim/internal/db"
)

// LedgerStatus is what the ledger says about one batch id.
type LedgerStatus struct {
	ID      string
	Status  batchclaim.Status
	Invalid []byte // JSON details of invalid transactions, if any
}

// StatusSource asks the ledger about batch ids (a DLT adapter; it splits large requests).
type StatusSource interface {
	Statuses(ctx context.Context, ids []string) ([]LedgerStatus, error)
}

// Poller defaults.
const (
	PollIntervalDefault = time.Second
	PollConcurrency     = 4
	PollMaxBatches      = 1000
)

// PollerConfig configures a Poller.
type PollerConfig struct {
	// Interval between polls. Zero means 1s.
	Interval time.Duration
	// Concurrency bounds the service_ids asked about at once. Zero means 4.
	Concurrency int
	// MaxBatches bounds the batches asked about per poll. Zero means 1000.
	MaxBatches int
	// Logger; nil discards.
	Logger *slog.Logger
}

// Poller asks the ledger about the batches of claimed service_ids whose outcome is not yet
// known, and records the answers through a Recorder.
type Poller struct {
	cfg   PollerConfig
	pool  claims.Querier
	fence Fencer
	rec   *Recorder
	src   StatusSource
	q     *db.Queries
	log   *slog.Logger
}

// NewPoller returns a Poller. It does no I/O.
func NewPoller(pool claims.Querier, fence Fencer, rec *Recorder, src StatusSource, cfg PollerConfig) (*Poller, error) {
	cfg.Interval = cmp.Or(cfg.Interval, PollIntervalDefault)
	cfg.Concurrency = cmp.Or(cfg.Concurrency, PollConcurrency)
	cfg.MaxBatches = cmp.Or(cfg.MaxBatches, PollMaxBatches)
	if cfg.Interval < 0 || cfg.Concurrency < 0 || cfg.MaxBatches < 0 {
		return nil, fmt.Errorf("poller: interval, concurrency and max batches must be positive")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Poller{cfg: cfg, pool: pool, fence: fence, rec: rec, src: src, q: db.New(), log: cfg.Logger}, nil
}

// Run polls every Interval until ctx ends.
func (p *Poller) Run(ctx context.Context) error {
	t := time.NewTicker(p.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		if _, err := p.PollOnce(ctx); err != nil && ctx.Err() == nil {
			p.log.Warn("status poll failed", "error", err)
		}
	}
}

// PollOnce runs one poll and returns how many batches it asked about.
func (p *Poller) PollOnce(ctx context.Context) (int, error) {
	held := p.fence.Held()
	if len(held) == 0 {
		return 0, nil
	}
	byService := make(map[string]claims.Claim, len(held))
	ids := make([]string, len(held))
	for i, c := range held {
		byService[c.ServiceID], ids[i] = c, c.ServiceID
	}
	rows, err := p.q.BatchesToPoll(ctx, p.pool, db.BatchesToPollParams{ServiceIds: ids, MaxRows: int32(p.cfg.MaxBatches)})
	if err != nil {
		return 0, fmt.Errorf("read batches to poll: %w", err)
	}
	groups := map[string][]db.BatchesToPollRow{}
	for _, r := range rows {
		groups[r.ServiceID] = append(groups[r.ServiceID], r)
	}
	sem := make(chan struct{}, p.cfg.Concurrency)
	var wg sync.WaitGroup
	for svc, g := range groups {
		c := byService[svc]
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := p.pollService(ctx, c, g); err != nil && ctx.Err() == nil && c.Context().Err() == nil {
				p.log.Warn("status poll of service failed", "service_id", c.ServiceID, "error", err)
			}
		}()
	}
	wg.Wait()
	return len(rows), nil
}

// pollService asks about one service_id's batches under its claim's context.
func (p *Poller) pollService(ctx context.Context, c claims.Claim, rows []db.BatchesToPollRow) error {
	cctx, cancel := context.WithCancel(c.Context())
	defer cancel()
	stop := context.AfterFunc(ctx, cancel)
	defer stop()
	asked := make(map[string]db.BatchesToPollRow, len(rows))
	ids := make([]string, 0, len(rows))
	for _, r := range rows {
		asked[r.BatchID] = r
		ids = append(ids, r.BatchID)
	}
	statuses, err := p.src.Statuses(cctx, ids)
	if err != nil {
		return err
	}
	ups := make([]StatusUpdate, 0, len(statuses))
	for _, s := range statuses {
		r, ok := asked[s.ID]
		if !ok {
			p.log.Warn("ledger answered about a batch id that was not asked; ignored", "service_id", c.ServiceID, "batch_id", s.ID)
			continue
		}
		ups = append(ups, StatusUpdate{Seq: r.Seq, BatchID: r.BatchID, From: batchclaim.State(r.State), Status: s.Status, Invalid: s.Invalid})
	}
	return p.rec.RecordStatuses(cctx, c, ups, false)
}
