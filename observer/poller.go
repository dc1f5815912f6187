package observer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/claims"
	"github.com/batchclaim/batchclaim/internal/db"
	"github.com/batchclaim/batchclaim/internal/tracing"
	"github.com/batchclaim/batchclaim/pgdb"
)

// StatusSource asks the ledger about batch ids (a dlt.Client; it splits large requests).
type StatusSource interface {
	Statuses(ctx context.Context, ids []string) ([]batchclaim.LedgerStatus, error)
}

// StatusWaiter is a StatusSource that can also wait, up to wait, until none of the batches
// asked about is pending before it answers (the ledgers' wait parameter).
type StatusWaiter interface {
	StatusSource
	StatusesWait(ctx context.Context, ids []string, wait time.Duration) ([]batchclaim.LedgerStatus, error)
}

// PollWaitDefault is PollerConfig.Wait's default.
const PollWaitDefault = time.Second

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
	// Wait, when the StatusSource is a StatusWaiter, lets each request wait up to this long
	// for the batches it asks about to settle (the ledgers' wait parameter), so that an
	// outcome is learnt as soon as the ledger has it rather than at the next poll; a poll
	// that learnt something is followed by the next at once. Zero means 1s; negative never
	// waits.
	Wait time.Duration
	// StatementTimeout bounds each database statement of a poll, so that a connection that
	// hangs is abandoned instead of stopping the poller. Zero means 30s.
	StatementTimeout time.Duration
	// SweepInterval is how often a poll looks at every held claim rather than only those it
	// was told of (Note) or found something to ask about before. Zero means 30s.
	SweepInterval time.Duration
	// Logger; nil discards.
	Logger *slog.Logger
}

// withDefaults returns c with every zero field filled in.
func (c PollerConfig) withDefaults() PollerConfig {
	c.Interval = cmp.Or(c.Interval, PollIntervalDefault)
	c.Concurrency = cmp.Or(c.Concurrency, PollConcurrency)
	c.MaxBatches = cmp.Or(c.MaxBatches, PollMaxBatches)
	c.IDsPerRequest = cmp.Or(c.IDsPerRequest, PollIDsPerRequestDefault)
	c.Wait = cmp.Or(c.Wait, PollWaitDefault)
	c.StatementTimeout = cmp.Or(c.StatementTimeout, 30*time.Second)
	c.SweepInterval = cmp.Or(c.SweepInterval, 30*time.Second)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// validate checks c with its defaults filled in.
func (c PollerConfig) validate() error {
	var errs []error
	for _, f := range []struct {
		name string
		bad  bool
		val  any
	}{
		{"Interval", c.Interval < 0, c.Interval}, {"Concurrency", c.Concurrency < 0, c.Concurrency},
		{"MaxBatches", c.MaxBatches < 0, c.MaxBatches}, {"IDsPerRequest", c.IDsPerRequest < 0, c.IDsPerRequest},
		{"StatementTimeout", c.StatementTimeout < 0, c.StatementTimeout}, {"SweepInterval", c.SweepInterval < 0, c.SweepInterval},
	} {
		if f.bad {
			errs = append(errs, fmt.Errorf("%s must not be negative, got %v", f.name, f.val))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("poller: %w", errors.Join(errs...))
	}
	return nil
}

// Poller asks the ledger about the batches of claimed service_ids whose outcome is not yet
// known, and records the answers through a Recorder.
type Poller struct {
	cfg   PollerConfig
	db    pgdb.DB
	fence Fencer
	rec   *Recorder
	src   StatusSource
	q     *db.Queries
	log   *slog.Logger

	wake chan struct{}

	mu      sync.Mutex      // one poll at a time; guards cursor, changed, keys and sweptAt
	cursor  pollCursor      // the last batch the previous poll read
	changed int             // status changes the last poll recorded
	keys    map[string]bool // service_ids with something to ask about, as far as known
	sweptAt time.Time       // when a poll last looked at every held claim

	notes sync.Mutex // guards noted
	noted []string   // Note's service_ids, not yet in keys
}

// pollCursor is a place in (service_id, seq) order; the zero value is before the first.
type pollCursor struct {
	serviceID string
	seq       int64
}

func (c pollCursor) before(r db.BatchesToPollRow) bool {
	return c.serviceID < r.ServiceID || (c.serviceID == r.ServiceID && c.seq < r.Seq)
}

// NewPoller returns a Poller that reads in db. It does no I/O.
func NewPoller(db pgdb.DB, fence Fencer, rec *Recorder, src StatusSource, cfg PollerConfig) (*Poller, error) {
	if err := db.Err(); err != nil {
		return nil, fmt.Errorf("observer: %w", err)
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("observer: %w", err)
	}
	return &Poller{cfg: cfg, db: db, fence: fence, rec: rec, src: src, q: queries, log: cfg.Logger,
		wake: make(chan struct{}, 1), keys: map[string]bool{}}, nil
}

// Note tells the poller that a batch of serviceID awaits the ledger's answer (it was accepted,
// or its outcome is unknown), or may (the claim was just gained): the next polls look at it
// until nothing of it is left to ask about.
func (p *Poller) Note(serviceID string) {
	p.notes.Lock()
	p.noted = append(p.noted, serviceID)
	p.notes.Unlock()
}

// Wake asks for a poll soon (a batch was accepted and its outcome is awaited).
func (p *Poller) Wake() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// Run polls every Interval, when woken, and at once after a poll that learnt something,
// until ctx ends.
func (p *Poller) Run(ctx context.Context) error {
	t := time.NewTicker(p.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		case <-p.wake:
		}
		for {
			if _, err := p.PollOnce(ctx); err != nil && ctx.Err() == nil {
				p.log.Warn("status poll failed", "error", err)
				break
			}
			p.mu.Lock()
			more := p.changed > 0
			p.mu.Unlock()
			if !more || ctx.Err() != nil {
				break
			}
		}
	}
}

// PollOnce runs one poll and returns how many batches it asked about: at most MaxBatches,
// the next ones after those of the previous poll. It looks at the held service_ids it was
// told of (Note) or found something to ask about before, and every SweepInterval (and the
// first time) at every held one. Their ids go to the StatusSource in packs of at most
// IDsPerRequest, whatever their service_id; each answer is recorded under its own
// service_id's claim. A failed request is logged and its batches are asked about again when
// the rotation comes back to them.
func (p *Poller) PollOnce(ctx context.Context) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.changed = 0
	// The claims of the service_ids to ask about are looked up one by one, so that a poll
	// costs what it asks about, not what the instance holds; the whole list is read for the
	// sweep alone.
	byService := map[string]claims.Claim{}
	if time.Since(p.sweptAt) >= p.cfg.SweepInterval {
		held := p.fence.Held()
		if len(held) == 0 {
			return 0, nil // nothing held, or the engine may not work now: sweep next time
		}
		p.sweptAt = time.Now()
		for _, c := range held {
			byService[c.ServiceID] = c
			p.keys[c.ServiceID] = true
		}
	}
	p.notes.Lock()
	for _, id := range p.noted {
		p.keys[id] = true
	}
	p.noted = nil
	p.notes.Unlock()
	svcs := make([]string, 0, len(p.keys))
	var gone []string
	for id := range p.keys {
		c, ok := byService[id]
		if !ok {
			c, ok = p.fence.Holds(id)
		}
		if !ok {
			gone = append(gone, id)
			continue
		}
		byService[id] = c
		svcs = append(svcs, id)
	}
	if len(svcs) == 0 {
		// None held: the engine may be between a missed renewal and the next one, when it
		// answers for no claim; keep the keys for the next poll.
		return 0, nil
	}
	for _, id := range gone {
		delete(p.keys, id) // not ours (any more)
	}
	sort.Strings(svcs)
	ctx, span := tracing.Start(ctx, tracing.Poll, tracing.Claims.Int(len(svcs)))
	defer span.End()
	rows, err := p.nextPage(ctx, svcs)
	span.SetAttributes(tracing.Batches.Int(len(rows)))
	if err != nil {
		return 0, err
	}
	p.forgetIdle(svcs, rows)
	packs := p.pack(rows)
	sem := make(chan struct{}, p.cfg.Concurrency)
	var (
		wg   sync.WaitGroup
		umu  sync.Mutex
		ups  []StatusUpdate
		errs []error
	)
	for _, pk := range packs {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			got, err := p.ask(ctx, byService, pk)
			umu.Lock()
			defer umu.Unlock()
			ups = append(ups, got...)
			if err != nil && ctx.Err() == nil {
				errs = append(errs, fmt.Errorf("status request for %d batches: %w", len(pk.ids), err))
			}
		})
	}
	wg.Wait()
	// Every answer of the poll in one write; answers that change nothing are not written.
	changed := 0
	for _, u := range ups {
		if u.Status.State() != u.From {
			changed++
		}
	}
	p.changed = changed
	wctx, cancel := context.WithTimeout(ctx, p.cfg.StatementTimeout)
	defer cancel()
	if err := p.rec.RecordStatuses(wctx, ups); err != nil && !errors.Is(err, batchclaim.ErrClaimLost) && ctx.Err() == nil {
		errs = append(errs, err)
	}
	for _, err := range errs {
		p.log.Warn("status poll", "error", err)
	}
	return len(rows), nil
}

// forgetIdle drops from keys the service_ids of svcs (sorted) that the page shows to have
// nothing to ask about: those it covered (all, unless it stopped at MaxBatches rows) and
// returned no row of.
func (p *Poller) forgetIdle(svcs []string, rows []db.BatchesToPollRow) {
	if len(rows) >= p.cfg.MaxBatches {
		return // a full page: which service_ids it covered is not known
	}
	some := make(map[string]bool, len(rows))
	for _, r := range rows {
		some[r.ServiceID] = true
	}
	for _, id := range svcs {
		if !some[id] {
			delete(p.keys, id)
		}
	}
}

// nextPage reads up to MaxBatches batches to ask about after the cursor, wrapping around to
// the first ones when it reaches the end, and moves the cursor to the last one read.
func (p *Poller) nextPage(ctx context.Context, svcs []string) ([]db.BatchesToPollRow, error) {
	read := func(keys []string, after pollCursor, limit int) ([]db.BatchesToPollRow, error) {
		ctx, cancel := context.WithTimeout(ctx, p.cfg.StatementTimeout)
		defer cancel()
		rows, err := p.q.BatchesToPoll(ctx, p.db, db.BatchesToPollParams{
			ServiceIds: keys, AfterServiceID: after.serviceID, AfterSeq: after.seq, MaxRows: int32(limit),
		})
		if err != nil {
			return nil, fmt.Errorf("read batches to poll: %w", err)
		}
		return rows, nil
	}
	// svcs is sorted: the read after the cursor needs the service_ids from the cursor's on,
	// the wrap-around read those up to it.
	split := sort.SearchStrings(svcs, p.cursor.serviceID)
	rows, err := read(svcs[split:], p.cursor, p.cfg.MaxBatches)
	if err != nil {
		return nil, err
	}
	if len(rows) < p.cfg.MaxBatches && p.cursor != (pollCursor{}) {
		upTo := svcs[:min(split+1, len(svcs))]
		head, err := read(upTo, pollCursor{}, p.cfg.MaxBatches-len(rows))
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
	ids     []string
	asked   map[string][]db.BatchesToPollRow
	pending bool // some batch of it is PENDING: worth waiting for
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
		packs[i].pending = packs[i].pending || r.State == string(batchclaim.StatePending)
	}
	return packs
}

// ask sends one pack (waiting for the batches to settle when the source can) and returns
// the answers that change something, each under its own service_id's claim.
func (p *Poller) ask(ctx context.Context, byService map[string]claims.Claim, pk statusPack) ([]StatusUpdate, error) {
	var (
		statuses []batchclaim.LedgerStatus
		err      error
	)
	if w, ok := p.src.(StatusWaiter); ok && p.cfg.Wait > 0 && pk.pending {
		statuses, err = w.StatusesWait(ctx, pk.ids, p.cfg.Wait)
	} else {
		statuses, err = p.src.Statuses(ctx, pk.ids)
	}
	if err != nil {
		return nil, err
	}
	var ups []StatusUpdate
	for _, s := range statuses {
		rows, ok := pk.asked[s.ID]
		if !ok {
			p.log.Warn("ledger answered about a batch id that was not asked; ignored", "batch_id", s.ID)
			continue
		}
		invalid, err := s.InvalidDetails()
		if err != nil {
			p.log.Warn("invalid transactions of a batch not recorded", "batch_id", s.ID, "error", err)
		}
		for _, r := range rows {
			from := batchclaim.State(r.State)
			if s.State() == from && s.Status != batchclaim.StatusUnknown {
				continue // nothing new: nothing to write
			}
			ups = append(ups, StatusUpdate{Claim: byService[r.ServiceID], Seq: r.Seq, BatchID: r.BatchID, Attempt: int(r.Attempts),
				From: from, Status: s.Status, Invalid: invalid})
		}
	}
	return ups, nil
}
