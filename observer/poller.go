package observer

import (
	"cmp"
	"context"
	"errors"
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
	// PollIDsPerRequestDefault is the most ids one status request carries: the Sawtooth REST
	// API's limit for GET /batch_statuses.
	PollIDsPerRequestDefault = 15
)

// PollerConfig configures a Poller.
type PollerConfig struct {
	// Interval between polls. Zero means 1s.
	Interval time.Duration
	// Concurrency bounds the status requests running at once. Zero means 4.
	Concurrency int
	// MaxBatches bounds the batches asked about per poll; when more are open, each poll
	// takes the next ones in (service_id, seq) order after where the previous poll stopped,
	// wrapping around, so every batch is asked about within ceil(open/MaxBatches) polls.
	// Zero means 1000.
	MaxBatches int
	// IDsPerRequest bounds the batch ids of one StatusSource call; ids of several
	// service_ids share a call. Zero means 15 (PollIDsPerRequestDefault, the Sawtooth limit).
	IDsPerRequest int
	// Logger; nil discards.
	Logger *slog.Logger
}

func (c PollerConfig) validate() error {
	if c.Interval < 0 || c.Concurrency < 0 || c.MaxBatches < 0 || c.IDsPerRequest < 0 {
		return fmt.Errorf("poller: interval %s, concurrency %d, max batches %d and ids per request %d must not be negative",
			c.Interval, c.Concurrency, c.MaxBatches, c.IDsPerRequest)
	}
	return nil
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

	mu     sync.Mutex // one poll at a time; guards cursor
	cursor pollCursor // the last batch the previous poll read
}

// pollCursor is a place in (service_id, seq) order; the zero value is before the first.
type pollCursor struct {
	serviceID string
	seq       int64
}

func (c pollCursor) before(r db.BatchesToPollRow) bool {
	return c.serviceID < r.ServiceID || (c.serviceID == r.ServiceID && c.seq < r.Seq)
}

// NewPoller returns a Poller. It does no I/O.
func NewPoller(pool claims.Querier, fence Fencer, rec *Recorder, src StatusSource, cfg PollerConfig) (*Poller, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg.Interval = cmp.Or(cfg.Interval, PollIntervalDefault)
	cfg.Concurrency = cmp.Or(cfg.Concurrency, PollConcurrency)
	cfg.MaxBatches = cmp.Or(cfg.MaxBatches, PollMaxBatches)
	cfg.IDsPerRequest = cmp.Or(cfg.IDsPerRequest, PollIDsPerRequestDefault)
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

// PollOnce runs one poll and returns how many batches it asked about: at most MaxBatches,
// the next ones after those of the previous poll. Their ids go to the StatusSource in
// packs of at most IDsPerRequest, whatever their service_id; each answer is recorded under
// its own service_id's claim. A failed request is logged and its batches are asked about
// again when the rotation comes back to them.
func (p *Poller) PollOnce(ctx context.Context) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	held := p.fence.Held()
	if len(held) == 0 {
		return 0, nil
	}
	byService := make(map[string]claims.Claim, len(held))
	svcs := make([]string, len(held))
	for i, c := range held {
		byService[c.ServiceID], svcs[i] = c, c.ServiceID
	}
	rows, err := p.nextPage(ctx, svcs)
	if err != nil {
		return 0, err
	}
	packs := p.pack(rows)
	sem := make(chan struct{}, p.cfg.Concurrency)
	var wg sync.WaitGroup
	for _, pk := range packs {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := p.ask(ctx, byService, pk); err != nil && ctx.Err() == nil {
				p.log.Warn("status request failed", "batches", len(pk.ids), "error", err)
			}
		})
	}
	wg.Wait()
	return len(rows), nil
}

// nextPage reads up to MaxBatches batches to ask about after the cursor, wrapping around to
// the first ones when it reaches the end, and moves the cursor to the last one read.
func (p *Poller) nextPage(ctx context.Context, svcs []string) ([]db.BatchesToPollRow, error) {
	read := func(after pollCursor, limit int) ([]db.BatchesToPollRow, error) {
		rows, err := p.q.BatchesToPoll(ctx, p.pool, db.BatchesToPollParams{
			ServiceIds: svcs, AfterServiceID: after.serviceID, AfterSeq: after.seq, MaxRows: int32(limit),
		})
		if err != nil {
			return nil, fmt.Errorf("read batches to poll: %w", err)
		}
		return rows, nil
	}
	rows, err := read(p.cursor, p.cfg.MaxBatches)
	if err != nil {
		return nil, err
	}
	if len(rows) < p.cfg.MaxBatches && p.cursor != (pollCursor{}) {
		head, err := read(pollCursor{}, p.cfg.MaxBatches-len(rows))
		if err != nil {
			return nil, err
		}
		for _, r := range head { // up to the cursor: those after it were just read
			if p.cursor.before(r) {
				break
			}
			rows = append(rows, r)
		}
	}
	p.cursor = pollCursor{}
	if len(rows) > 0 {
		last := rows[len(rows)-1]
		p.cursor = pollCursor{serviceID: last.ServiceID, seq: last.Seq}
	}
	return rows, nil
}

// statusPack is one status request: distinct ids and the batches each stands for (the same
// id may be stored under two service_ids).
type statusPack struct {
	ids   []string
	asked map[string][]db.BatchesToPollRow
}

// pack splits rows into requests of at most IDsPerRequest distinct ids, in order.
func (p *Poller) pack(rows []db.BatchesToPollRow) []statusPack {
	var packs []statusPack
	where := map[string]int{} // batch id -> its pack
	for _, r := range rows {
		i, ok := where[r.BatchID]
		if !ok {
			if len(packs) == 0 || len(packs[len(packs)-1].ids) == p.cfg.IDsPerRequest {
				packs = append(packs, statusPack{asked: map[string][]db.BatchesToPollRow{}})
			}
			i = len(packs) - 1
			where[r.BatchID] = i
			packs[i].ids = append(packs[i].ids, r.BatchID)
		}
		packs[i].asked[r.BatchID] = append(packs[i].asked[r.BatchID], r)
	}
	return packs
}

// ask sends one pack, checks the answers against the ids asked and records what changed,
// one fenced transaction per service_id.
func (p *Poller) ask(ctx context.Context, byService map[string]claims.Claim, pk statusPack) error {
	statuses, err := p.src.Statuses(ctx, pk.ids)
	if err != nil {
		return err
	}
	ups := map[string][]StatusUpdate{}
	var order []string
	for _, s := range statuses {
		rows, ok := pk.asked[s.ID]
		if !ok {
			p.log.Warn("ledger answered about a batch id that was not asked; ignored", "batch_id", s.ID)
			continue
		}
		for _, r := range rows {
			from := batchclaim.State(r.State)
			if stateFor(s.Status) == from && s.Status != batchclaim.StatusUnknown {
				continue // nothing new: nothing to write
			}
			if ups[r.ServiceID] == nil {
				order = append(order, r.ServiceID)
			}
			ups[r.ServiceID] = append(ups[r.ServiceID], StatusUpdate{Seq: r.Seq, BatchID: r.BatchID, From: from, Status: s.Status, Invalid: s.Invalid})
		}
	}
	var errs []error
	for _, svc := range order {
		c := byService[svc]
		if err := p.record(ctx, c, ups[svc]); err != nil && ctx.Err() == nil && c.Context().Err() == nil {
			errs = append(errs, fmt.Errorf("record statuses of service_id %s: %w", svc, err))
		}
	}
	return errors.Join(errs...)
}

// record writes one service_id's answers under its claim, stopping if the claim is lost.
func (p *Poller) record(ctx context.Context, c claims.Claim, ups []StatusUpdate) error {
	cctx, cancel := context.WithCancel(c.Context())
	defer cancel()
	stop := context.AfterFunc(ctx, cancel)
	defer stop()
	return p.rec.RecordStatuses(cctx, c, ups, false)
}
