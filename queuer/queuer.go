package queuer

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
)

// Engine is the part of claims.Engine the queuer needs: the claims held now. The engine
// runs its own claim cycle and lease (claims.Engine.Run).
type Engine interface {
	Held() []claims.Claim
}

// Dispatcher runs jobs (a *submitter.Pool).
type Dispatcher interface {
	Free() int
	TrySubmit(j batchclaim.Job) bool
}

// Recorder makes the queuer's writes (observer.Recorder): the in-flight marks of the heads a
// round hands out, all in one statement, and the adoption of orphaned in-flight batches.
type Recorder interface {
	// Mark marks the jobs' batches in flight, each fenced on its own claim, and returns the
	// ones marked with their payload and attempt-log id filled in.
	Mark(ctx context.Context, jobs []batchclaim.Job) ([]batchclaim.Job, error)
	// Adopt turns an orphaned INFLIGHT batch into UNKNOWN.
	Adopt(ctx context.Context, c claims.Claim, b batchclaim.Batch, detail string) error
}

// Defaults.
const (
	FetchLimitDefault     = 1000
	UnknownGraceDefault   = 30 * time.Second
	UnknownAnswersDefault = 3
)

// Config configures a Queuer.
type Config struct {
	// Interval between fetches when nothing wakes the queuer earlier (node uses the claim
	// engine's renew interval). Required.
	Interval time.Duration
	// FetchLimit bounds the service_ids looked at per fetch. Zero means 1000.
	FetchLimit int
	// UnknownGrace: an UNKNOWN head is resubmitted once its last POST is this old (measured
	// by the database clock from the POST, not from the last status answer). Zero means 30s.
	UnknownGrace time.Duration
	// UnknownAnswers: an UNKNOWN head is resubmitted after this many consecutive UNKNOWN
	// answers from the ledger about its last POST (adopting an orphaned in-flight batch is
	// no answer). Zero means 3.
	UnknownAnswers int
	// SkipValid lets the next batch go once the head is VALID (adapters whose VALID fixes
	// the order).
	SkipValid bool
	// Logger; nil discards.
	Logger *slog.Logger
}

// Queuer is one instance's loop.
type Queuer struct {
	cfg  Config
	pool claims.Querier
	eng  Engine
	disp Dispatcher
	rec  Recorder
	q    *db.Queries
	log  *slog.Logger
	wake chan struct{}

	mu       sync.Mutex
	inflight map[string]int64 // service_id -> seq handed to the dispatcher and not yet done
	cursor   string           // the last service_id handed out: the next fetch starts after it
}

// New returns a Queuer. It does no I/O.
func New(pool claims.Querier, eng Engine, disp Dispatcher, rec Recorder, cfg Config) (*Queuer, error) {
	cfg.FetchLimit = cmp.Or(cfg.FetchLimit, FetchLimitDefault)
	cfg.UnknownGrace = cmp.Or(cfg.UnknownGrace, UnknownGraceDefault)
	cfg.UnknownAnswers = cmp.Or(cfg.UnknownAnswers, UnknownAnswersDefault)
	switch {
	case cfg.Interval <= 0:
		return nil, errors.New("queuer: interval must be positive")
	case cfg.FetchLimit < 0 || cfg.UnknownGrace < 0 || cfg.UnknownAnswers < 0:
		return nil, errors.New("queuer: fetch limit, unknown grace and unknown answers must be positive")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Queuer{cfg: cfg, pool: pool, eng: eng, disp: disp, rec: rec, q: db.New(), log: cfg.Logger,
		wake: make(chan struct{}, 1), inflight: map[string]int64{}}, nil
}

// Run fetches every Interval, and whenever woken (a claim gained, a submission ended, a
// batch changed state), until ctx ends. It then stops handing out work; submissions already
// running are not touched.
func (q *Queuer) Run(ctx context.Context) error {
	t := time.NewTicker(q.cfg.Interval)
	defer t.Stop()
	for {
		if _, err := q.Fetch(ctx); err != nil && ctx.Err() == nil {
			q.log.Warn("fetch failed", "error", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		case <-q.wake:
		}
	}
}

// Wake asks for a fetch soon (a submission ended or a batch changed state).
func (q *Queuer) Wake() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// Done is called when a job is over, whatever its outcome.
func (q *Queuer) Done(w batchclaim.Job) {
	q.mu.Lock()
	if q.inflight[w.Claim.ServiceID] == w.Batch.Seq {
		delete(q.inflight, w.Claim.ServiceID)
	}
	q.mu.Unlock()
	q.Wake()
}

// InFlight is the number of service_ids with work handed out.
func (q *Queuer) InFlight() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.inflight)
}

// Fetch looks at the head batch of each claimed service_id without work in flight, marks
// the ones that may go now in flight (one statement for all of them, fenced per row) and
// hands them out. It returns how many it handed out.
func (q *Queuer) Fetch(ctx context.Context) (int, error) {
	free := q.disp.Free()
	if free == 0 {
		return 0, nil
	}
	claimsByID, ids := q.candidates()
	if len(ids) == 0 {
		return 0, nil
	}
	heads, err := q.q.BatchHeads(ctx, q.pool, db.BatchHeadsParams{ServiceIds: ids, SkipValid: q.cfg.SkipValid})
	if err != nil {
		return 0, fmt.Errorf("read head batches: %w", err)
	}
	order := make(map[string]int, len(ids))
	for i, id := range ids {
		order[id] = i
	}
	// Keep the rotation order of ids (the query does not promise one).
	sorted := make([]db.BatchHeadsRow, len(ids))
	present := make([]bool, len(ids))
	for _, h := range heads {
		i := order[h.ServiceID]
		sorted[i], present[i] = h, true
	}
	var jobs []batchclaim.Job
	for i, h := range sorted {
		if !present[i] || len(jobs) >= free {
			continue
		}
		c := claimsByID[h.ServiceID]
		reason, ok := q.decide(ctx, c, h)
		if !ok {
			continue
		}
		jobs = append(jobs, batchclaim.Job{Claim: c, Batch: batchOf(h), FromState: batchclaim.State(h.State), Reason: reason})
	}
	if len(jobs) == 0 {
		return 0, nil
	}
	q.mu.Lock()
	for _, j := range jobs {
		q.inflight[j.Claim.ServiceID] = j.Batch.Seq
	}
	q.cursor = jobs[len(jobs)-1].Claim.ServiceID
	q.mu.Unlock()
	marked, err := q.rec.Mark(ctx, jobs)
	going := make(map[int64]bool, len(marked))
	for _, j := range marked {
		going[j.Batch.Seq] = true
	}
	q.mu.Lock()
	for _, j := range jobs {
		if !going[j.Batch.Seq] {
			delete(q.inflight, j.Claim.ServiceID)
		}
	}
	q.mu.Unlock()
	handed := 0
	for _, j := range marked {
		if q.disp.TrySubmit(j) {
			handed++
			continue
		}
		// Only this queuer hands out work and it asked for at most Free jobs, so this does
		// not happen; if it did, the batch stays INFLIGHT and is adopted (the ledger is asked
		// before it is sent again).
		q.log.Warn("no free worker for a batch marked in flight", "service_id", j.Claim.ServiceID, "seq", j.Batch.Seq)
		q.mu.Lock()
		delete(q.inflight, j.Claim.ServiceID)
		q.mu.Unlock()
	}
	if err != nil {
		return handed, fmt.Errorf("mark heads in flight: %w", err)
	}
	return handed, nil
}

// candidates returns the held claims without work in flight, bounded by FetchLimit, in
// round-robin order: starting after the service_id handed out last.
func (q *Queuer) candidates() (map[string]claims.Claim, []string) {
	held := q.eng.Held() // sorted by service_id
	q.mu.Lock()
	defer q.mu.Unlock()
	byID := make(map[string]claims.Claim, len(held))
	ids := make([]string, 0, len(held))
	start := sort.Search(len(held), func(i int) bool { return held[i].ServiceID > q.cursor })
	for i := range held {
		c := held[(start+i)%len(held)]
		if _, busy := q.inflight[c.ServiceID]; busy {
			continue
		}
		byID[c.ServiceID] = c
		ids = append(ids, c.ServiceID)
		if len(ids) == q.cfg.FetchLimit {
			break
		}
	}
	return byID, ids
}

// decide says whether the head h of c's service_id may go now, and why.
func (q *Queuer) decide(ctx context.Context, c claims.Claim, h db.BatchHeadsRow) (string, bool) {
	switch batchclaim.State(h.State) {
	case batchclaim.StateNew:
		return "first", true
	case batchclaim.StateDelayed:
		return "retry", h.Due
	case batchclaim.StateUnknown:
		grace := h.SincePostSeconds >= q.cfg.UnknownGrace.Seconds()
		return "resubmit", grace || int(h.UnknownCount) >= q.cfg.UnknownAnswers
	case batchclaim.StateInflight:
		// Not ours in flight (those were filtered out): the outcome of that POST is unknown.
		detail := "in flight when its owner changed"
		if h.ClaimEpoch != nil && *h.ClaimEpoch == c.Epoch {
			detail = "in flight when this instance lost track of it"
		}
		if err := q.rec.Adopt(ctx, c, batchOf(h), detail); err != nil && ctx.Err() == nil {
			q.log.Info("could not adopt in-flight batch", "service_id", c.ServiceID, "seq", h.Seq, "error", err)
		}
	}
	return "", false
}

func batchOf(h db.BatchHeadsRow) batchclaim.Batch {
	return batchclaim.Batch{Seq: h.Seq, ServiceID: h.ServiceID, BatchID: h.BatchID, Attempts: int(h.Attempts)}
}
