package queuer

import (
	"cmp"
	"container/heap"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/claims"
	"github.com/batchclaim/batchclaim/internal/db"
	"github.com/batchclaim/batchclaim/internal/tracing"
	"github.com/batchclaim/batchclaim/observer"
	"github.com/batchclaim/batchclaim/pgdb"
)

// Engine is the part of claims.Engine the queuer needs: the claims held now. The engine
// runs its own claim cycle and lease (claims.Engine.Run).
type Engine interface {
	Held() []claims.Claim
	Holds(serviceID string) (claims.Claim, bool)
	// Yielding: the claim is being given back; no new job of it starts here.
	Yielding(serviceID string) bool
	InstanceID() uuid.UUID
}

// Dispatcher runs jobs (a *submitter.Pool).
type Dispatcher interface {
	// Free is the number of idle workers.
	Free() int
	// FreeMemory is how many more payload bytes the running jobs may hold, and whether they
	// hold none (a job of any size may then go).
	FreeMemory() (free int64, empty bool)
	// TrySubmit runs a job marked in flight, and reports whether it will; the queuer asks
	// for at most Free jobs at a time.
	TrySubmit(j batchclaim.Job) bool
}

// Recorder makes the queuer's writes (observer.Recorder): the in-flight marks of the heads a
// round hands out, and the adoptions of batches left in flight, each set in one statement.
type Recorder interface {
	// Take reads the heads of the claims' service_ids and marks in flight, in the same
	// statement, those that are NEW and due, within the budget; it returns every head read and
	// the jobs marked.
	Take(ctx context.Context, t observer.Take) ([]observer.Head, []batchclaim.Job, error)
	// Mark marks the jobs' batches in flight, each fenced on its own claim, and returns the
	// ones marked with their payload and attempt count filled in.
	Mark(ctx context.Context, jobs []batchclaim.Job) ([]batchclaim.Job, error)
	// Adopt turns the jobs' batches, left INFLIGHT by a previous owner or by this instance
	// before it lost track of them, into UNKNOWN: the ledger is asked before they go again.
	Adopt(ctx context.Context, jobs []batchclaim.Job) error
}

// Defaults.
const (
	FetchLimitDefault     = 1000
	UnknownGraceDefault   = 30 * time.Second
	UnknownAnswersDefault = 3
)

// Config configures a Queuer.
type Config struct {
	// Interval is how often the queuer looks at claims nothing told it about (node uses the
	// claim engine's renew interval). Required.
	Interval time.Duration
	// FetchLimit bounds the service_ids one statement reads the heads of. Zero means 1000.
	FetchLimit int
	// SweepAll makes every Interval look at every held claim: for an instance that is not told
	// about new work (no LISTEN connection), the interval is then the latency of a new batch.
	// False: the queuer looks at the service_ids it is told about (Dirty: an enqueue, an ended
	// submission, a recorded status, a claim gained) and, as a safety net, at the next
	// FetchLimit held claims in turn every Interval.
	SweepAll bool
	// StatementTimeout bounds each statement of a fetch, so that a connection that hangs (a
	// database link frozen without a reset) is abandoned instead of stopping the queuer.
	// Zero means 4 x Interval.
	StatementTimeout time.Duration
	// UnknownGrace: an UNKNOWN head is resubmitted once it has been UNKNOWN this long (by the
	// database clock, from its POST's outcome or its adoption from a previous owner, not from
	// the last status answer). Zero means 30s.
	UnknownGrace time.Duration
	// UnknownAnswers: an UNKNOWN head is resubmitted after this many consecutive UNKNOWN
	// answers from the ledger about its last POST (adopting an orphaned in-flight batch is
	// no answer). Zero means 3.
	UnknownAnswers int
	// SkipValid lets the next batch go once the head is VALID (adapters whose VALID fixes
	// the order).
	SkipValid bool
	// Awaiting, if set, is told the service_id of each head a fetch read that waits for the
	// ledger's answer (PENDING, VALID, or UNKNOWN before its resubmission), so that the
	// status poller asks about it (node passes observer.Poller.Note). The poller learns of such
	// a head from the write that put it there; when that write committed but its answer was
	// lost (a link that froze), the fetch that follows is how it learns.
	Awaiting func(serviceID string)
	// Logger; nil discards.
	Logger *slog.Logger
}

// withDefaults returns c with every zero field filled in (Interval has no default).
func (c Config) withDefaults() Config {
	c.FetchLimit = cmp.Or(c.FetchLimit, FetchLimitDefault)
	c.UnknownGrace = cmp.Or(c.UnknownGrace, UnknownGraceDefault)
	c.UnknownAnswers = cmp.Or(c.UnknownAnswers, UnknownAnswersDefault)
	c.StatementTimeout = cmp.Or(c.StatementTimeout, 4*c.Interval)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// validate checks c with its defaults filled in.
func (c Config) validate() error {
	var errs []error
	if c.Interval <= 0 {
		errs = append(errs, fmt.Errorf("Interval must be positive, got %s", c.Interval))
	}
	for _, f := range []struct {
		name string
		bad  bool
		val  any
	}{
		{"FetchLimit", c.FetchLimit < 0, c.FetchLimit}, {"StatementTimeout", c.StatementTimeout < 0, c.StatementTimeout},
		{"UnknownGrace", c.UnknownGrace < 0, c.UnknownGrace}, {"UnknownAnswers", c.UnknownAnswers < 0, c.UnknownAnswers},
	} {
		if f.bad {
			errs = append(errs, fmt.Errorf("%s must not be negative, got %v", f.name, f.val))
		}
	}
	return errors.Join(errs...)
}

// Queuer is one instance's loop: it hands the next batch of each claimed service_id that has
// one ready to the dispatcher, at most one in flight per service_id.
//
// It looks at a service_id when it has reason to: it was told of new work (Dirty), a
// submission of it ended (Done), it was gained, or a time the queuer noted (a DELAYED head's
// next attempt, an UNKNOWN head's grace, a NEW head's run-at time) came. The cost of a fetch
// therefore follows the service_ids with work, however many claims the instance holds;
// Config.SweepAll and the Interval's safety sweep cover what nobody told it about.
type Queuer struct {
	cfg  Config
	db   pgdb.DB
	eng  Engine
	disp Dispatcher
	rec  Recorder
	q    *db.Queries
	log  *slog.Logger
	wake chan struct{}

	stopped atomic.Bool  // Run returned: no more work is handed out or chained
	round   atomic.Int64 // unix nanoseconds when a fetch last read heads from the database

	mu       sync.Mutex
	inflight map[string]int64 // service_id -> seq handed to the dispatcher and not yet done
	floors   map[string]int64 // service_id -> pos of the last head read: no unfinished batch comes before it (BatchesTakeHeads)
	drained  map[string]int64 // service_id -> seq in flight whose outcome left the service_id without work (Drained)
	told     map[string]bool  // service_ids in flight the queuer was told about (or swept) meanwhile
	queue    []string         // service_ids to look at, in the order they were asked for
	queued   map[string]bool
	sweeps   []string // held claims to look at when nothing else waits (start, safety sweep)
	swept    map[string]bool
	all      bool    // queue every held claim to sweeps at the next fetch (start, lost notifications)
	due      dueHeap // service_ids whose head becomes ready at a time
	dueAt    map[string]time.Time
	sweep    string // the safety sweep's cursor: the last held service_id it queued
	starved  bool   // ready heads waited for a worker at the last fetch
	progress bool   // the last fetch took keys off the queue
}

// queries are the queuer's statements; they hold no state (New's db parameter hides the
// package's name).
var queries = db.New()

// New returns a Queuer that reads in db. It does no I/O.
func New(db pgdb.DB, eng Engine, disp Dispatcher, rec Recorder, cfg Config) (*Queuer, error) {
	if err := db.Err(); err != nil {
		return nil, fmt.Errorf("queuer: %w", err)
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("queuer: %w", err)
	}
	return &Queuer{cfg: cfg, db: db, eng: eng, disp: disp, rec: rec, q: queries, log: cfg.Logger,
		wake: make(chan struct{}, 1), inflight: map[string]int64{}, floors: map[string]int64{}, drained: map[string]int64{}, told: map[string]bool{}, queued: map[string]bool{}, swept: map[string]bool{},
		dueAt: map[string]time.Time{}, all: true}, nil
}

// Run fetches whenever there is reason to (see Queuer), and every Interval, until ctx ends.
// It then stops handing out work; submissions already running are not touched.
func (q *Queuer) Run(ctx context.Context) error {
	defer q.stopped.Store(true)
	tick := time.NewTicker(q.cfg.Interval)
	defer tick.Stop()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		if _, err := q.Fetch(ctx); err != nil && ctx.Err() == nil {
			q.log.Warn("fetch failed", "error", err)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if q.more() {
			continue
		}
		q.arm(timer)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
			q.sweepTick()
		case <-q.wake:
		case <-timer.C:
			q.fireDue(time.Now())
		}
	}
}

// LastRound is when a fetch last read heads from the database (zero before the first). Run
// fetches at least every Interval while the instance holds claims, so an old LastRound while
// claims are held means the data path cannot reach the database: a starved pool, a stuck
// server.
func (q *Queuer) LastRound() time.Time {
	if n := q.round.Load(); n != 0 {
		return time.Unix(0, n)
	}
	return time.Time{}
}

// Wake asks for a fetch soon.
func (q *Queuer) Wake() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// Dirty asks the queuer to look at the heads of these service_ids soon: work may have
// arrived for them (an enqueue, a recorded status, a resumed halt).
func (q *Queuer) Dirty(serviceIDs ...string) {
	q.mu.Lock()
	for _, id := range serviceIDs {
		q.enqueueLocked(id)
	}
	q.mu.Unlock()
	q.Wake()
}

// DirtyAll asks the queuer to look at every held claim soon (after notifications may have
// been missed).
func (q *Queuer) DirtyAll() {
	q.mu.Lock()
	q.all = true
	q.mu.Unlock()
	q.Wake()
}

func (q *Queuer) enqueueLocked(id string) {
	if !q.queued[id] {
		q.queued[id] = true
		q.queue = append(q.queue, id)
	}
}

func (q *Queuer) sweepLocked(id string) {
	if !q.swept[id] {
		q.swept[id] = true
		q.sweeps = append(q.sweeps, id)
	}
}

// Done is called when a job is over, whatever its outcome: its service_id may have its next
// batch ready. It is not looked at again when the job's outcome left it without work
// (Drained) and nothing told the queuer about it while the job ran. Either way the worker and
// the memory the job held are free again: when ready heads waited for them at the last fetch
// (starved) or service_ids wait in the queue, the queuer fetches again now, not at its next
// Interval.
func (q *Queuer) Done(j batchclaim.Job) {
	id := j.Claim.ServiceID
	q.mu.Lock()
	ends := q.inflight[id] == j.Batch.Seq
	quiet := ends && q.drained[id] == j.Batch.Seq && !q.told[id]
	if ends {
		q.endLocked(id)
	}
	if !quiet {
		q.enqueueLocked(id)
	}
	wake := !quiet || q.starved || len(q.queue) > 0
	q.mu.Unlock()
	if wake {
		q.Wake()
	}
}

// endLocked forgets the job of id in flight.
func (q *Queuer) endLocked(id string) {
	delete(q.inflight, id)
	delete(q.drained, id)
	delete(q.told, id)
}

// Drained is told that the outcome of seq, the job of serviceID in flight, finished it and
// left the service_id without an unfinished batch (observer.RecorderConfig.Drained). Work
// that arrives later wakes the queuer (Dirty); a wake-up that came while the job ran is
// kept for its Done, which then looks at the service_id again.
func (q *Queuer) Drained(serviceID string, seq int64) {
	q.mu.Lock()
	if q.inflight[serviceID] == seq {
		q.drained[serviceID] = seq
	}
	q.mu.Unlock()
}

// Chained is called when a worker that finished prev goes on with next, the next batch of the
// same service_id, which the outcome's write marked in flight.
func (q *Queuer) Chained(prev, next batchclaim.Job) {
	q.mu.Lock()
	if q.inflight[prev.Claim.ServiceID] == prev.Batch.Seq {
		q.inflight[prev.Claim.ServiceID] = next.Batch.Seq
	}
	q.mu.Unlock()
}

// ChainBurst is how many jobs of one service_id a worker may run in a row while other
// service_ids' ready heads wait for a worker.
const ChainBurst = 16

// MayChain reports whether a worker that finished a job, its run-th in a row of the same
// service_id, may go on with the service_id's next batch at once: yes unless the queuer is
// stopping, the claim yields (claims.Engine.Yielding: it is being given back), or other
// service_ids' ready heads waited for a worker at the last fetch and the worker has had its
// burst (ChainBurst): it then goes back to the queuer, which serves the service_ids in turn.
// A burst costs the service_ids waiting a little fairness and saves a round of statements
// per job.
func (q *Queuer) MayChain(j batchclaim.Job, run int) bool {
	if q.stopped.Load() || q.eng.Yielding(j.Claim.ServiceID) {
		return false
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	return !q.starved || run < ChainBurst
}

// InFlight is the number of service_ids with work handed out.
func (q *Queuer) InFlight() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.inflight)
}

// more reports whether another fetch should follow at once: keys are queued, workers are
// free, and the last fetch made progress.
func (q *Queuer) more() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.progress && (len(q.queue) > 0 || len(q.sweeps) > 0 || q.all) && q.disp.Free() > 0
}

// Fetch looks at the heads of queued service_ids (every held claim's the first time and
// after DirtyAll), marks the ones that may go now in flight, fenced per row, and hands them
// out: the NEW ones in the statement that reads the heads, the others (a retry, a
// resubmission) in a second one for all of them. It adopts heads left in flight by someone
// else, and notes when waiting heads become ready. It returns how many jobs it handed out.
func (q *Queuer) Fetch(ctx context.Context) (int, error) {
	q.mu.Lock()
	q.progress = false
	q.mu.Unlock()
	free := q.disp.Free()
	if free == 0 {
		q.mu.Lock()
		q.starved = q.starved || len(q.queue) > 0
		q.mu.Unlock()
		return 0, nil
	}
	claimsByID, ids, elsewhere := q.take(free)
	if len(elsewhere) > 0 {
		q.wakeHolders(ctx, elsewhere)
	}
	if len(ids) == 0 {
		q.mu.Lock()
		q.starved = false
		q.mu.Unlock()
		return 0, nil
	}
	parent := ctx
	ctx, span := tracing.Start(ctx, tracing.Fetch, tracing.Claims.Int(len(ids)))
	defer span.End()
	take := observer.Take{Claims: make([]claims.Claim, len(ids)), MaxJobs: free}
	take.MaxBytes, take.AnySize = q.disp.FreeMemory()
	if !q.cfg.SkipValid {
		take.Floors = make([]int64, len(ids))
	}
	q.mu.Lock()
	for i, id := range ids {
		take.Claims[i] = claimsByID[id]
		if take.Floors != nil {
			take.Floors[i] = q.floors[id]
		}
	}
	q.mu.Unlock()
	tctx, cancel := context.WithTimeout(ctx, q.cfg.StatementTimeout)
	heads, taken, err := q.rec.Take(tctx, take)
	cancel()
	if err != nil {
		q.requeue(ids)
		return 0, err
	}
	q.round.Store(time.Now().UnixNano())
	span.SetAttributes(tracing.Batches.Int(len(taken)))
	// The heads come in the queue's order; the NEW and due ones within the budget are marked
	// already (taken), the others are decided on here with what is left of it.
	var jobs, adopt []batchclaim.Job
	var waiting, retry []string // ready heads beyond the free workers or memory; heads the mark missed
	room, empty := take.MaxBytes, take.AnySize
	for _, j := range taken {
		room -= int64(len(j.Batch.Payload))
		empty = false
	}
	now := time.Now()
	for _, h := range heads {
		if h.Wanted {
			if h.Fenced && !h.Marked {
				retry = append(retry, h.ServiceID) // its head moved on meanwhile
			}
			continue
		}
		c := claimsByID[h.ServiceID]
		j := batchclaim.Job{Claim: c, Batch: batchOf(h), FromState: h.State}
		switch d := q.decide(c, h); {
		case d.adopt != "":
			j.Reason = d.adopt
			adopt = append(adopt, j)
		case d.reason == "":
			if d.wait > 0 {
				q.at(h.ServiceID, now.Add(d.wait))
			}
			if q.cfg.Awaiting != nil && awaitsLedger(h.State) {
				q.cfg.Awaiting(h.ServiceID)
			}
		case len(taken)+len(jobs) < free && (h.Size <= room || empty && len(jobs) == 0):
			j.Reason = d.reason
			jobs = append(jobs, j)
			room -= h.Size
		default:
			waiting = append(waiting, h.ServiceID)
		}
	}
	// The adopted service_ids are looked at again: an adoption starts the head's grace, and
	// one that failed is tried again (not only when the safety sweep comes back to them,
	// which with many claims can take many Intervals).
	var adopted []string
	adoptFailed := false
	if len(adopt) > 0 {
		for _, j := range adopt {
			adopted = append(adopted, j.Claim.ServiceID)
		}
		actx, cancel := context.WithTimeout(ctx, q.cfg.StatementTimeout)
		err := q.rec.Adopt(actx, adopt)
		cancel()
		if err != nil && !errors.Is(err, batchclaim.ErrClaimLost) {
			adoptFailed = true // no fetch at once: the next waits for a tick or a wake-up
			if parent.Err() == nil {
				q.log.Warn("could not adopt in-flight batches; trying again at the next fetch", "batches", len(adopt), "error", err)
			}
		}
	}
	q.mu.Lock()
	// A fetch whose ready heads all waited (for memory: it found workers free) made no
	// progress: the next one would read the same heads and find the same budget. The end of
	// a running job frees memory and wakes the queuer (Done).
	q.progress = !adoptFailed && (len(waiting) == 0 || len(taken)+len(jobs) > 0)
	q.starved = len(waiting) > 0
	if !q.cfg.SkipValid {
		for _, h := range heads {
			q.floors[h.ServiceID] = max(q.floors[h.ServiceID], h.Pos)
		}
	}
	for _, j := range taken {
		q.inflight[j.Claim.ServiceID] = j.Batch.Seq
	}
	for _, j := range jobs {
		q.inflight[j.Claim.ServiceID] = j.Batch.Seq
	}
	q.mu.Unlock()
	q.requeueFront(waiting)
	q.requeue(adopted)
	q.requeue(retry)
	handed := q.hand(taken)
	if len(jobs) == 0 {
		return handed, nil
	}
	mctx, mspan := tracing.Start(ctx, tracing.Mark, tracing.Batches.Int(len(jobs)))
	mctx, cancel = context.WithTimeout(mctx, q.cfg.StatementTimeout)
	marked, err := q.rec.Mark(mctx, jobs)
	cancel()
	tracing.End(mspan, err)
	going := make(map[int64]bool, len(marked))
	for _, j := range marked {
		going[j.Batch.Seq] = true
	}
	retry = retry[:0]
	q.mu.Lock()
	for _, j := range jobs {
		if !going[j.Batch.Seq] {
			q.endLocked(j.Claim.ServiceID)
			retry = append(retry, j.Claim.ServiceID) // its head moved on, or the claim went
		}
	}
	if err != nil {
		q.progress = false // the database failed: wait for the next tick or wake-up
	}
	q.mu.Unlock()
	q.requeue(retry)
	handed += q.hand(marked)
	if err != nil {
		return handed, fmt.Errorf("mark heads in flight: %w", err)
	}
	return handed, nil
}

// hand gives jobs marked in flight to the dispatcher and returns how many it took.
func (q *Queuer) hand(jobs []batchclaim.Job) int {
	handed := 0
	for _, j := range jobs {
		if q.disp.TrySubmit(j) {
			handed++
			continue
		}
		// The pool refuses only once it is cancelled (the instance is stopping): the batch
		// stays INFLIGHT and is adopted (the ledger is asked before it is sent again).
		q.log.Warn("the workers are stopping: a batch marked in flight is left for adoption", "service_id", j.Claim.ServiceID, "seq", j.Batch.Seq)
		q.mu.Lock()
		q.endLocked(j.Claim.ServiceID)
		q.mu.Unlock()
	}
	return handed
}

// wakeHolders passes the wake-ups of service_ids this instance was told about but does not
// hold on to whoever holds them now (ClaimsWakeHolders): an enqueue that committed after its
// service_id moved was addressed to this instance. Without it the new owner would find the
// work only at its safety sweep. A failure is logged: the sweep still finds the work.
func (q *Queuer) wakeHolders(ctx context.Context, ids []string) {
	ctx, cancel := context.WithTimeout(ctx, q.cfg.StatementTimeout)
	defer cancel()
	if _, err := q.q.ClaimsWakeHolders(ctx, q.db, db.ClaimsWakeHoldersParams{ServiceIds: ids, Claimant: q.eng.InstanceID()}); err != nil && ctx.Err() == nil {
		q.log.Warn("could not pass wake-ups on to the service_ids' holders; their safety sweep finds the work", "service_ids", len(ids), "error", err)
	}
}

// take removes from the queues the service_ids to read the heads of: held claims without
// work in flight, at most FetchLimit, and not many more than the free workers can take (ready
// heads are handed out in queue order; those that find no worker go back to the front). The
// service_ids the queuer was told about come before the sweeps. Each one taken is looked up
// in the engine on its own, so that a fetch costs what it takes, not what the instance holds
// (the whole list of held claims is read only when every claim is to be swept). elsewhere are
// the service_ids taken that this instance does not hold (any more).
func (q *Queuer) take(free int) (held map[string]claims.Claim, ids, elsewhere []string) {
	q.mu.Lock()
	all := q.all
	q.all = false
	q.mu.Unlock()
	if all {
		held := q.eng.Held() // the engine is never asked while q.mu is held
		q.mu.Lock()
		q.pruneFloorsLocked(held)
		for _, c := range held {
			q.sweepLocked(c.ServiceID)
		}
		q.mu.Unlock()
	}
	limit := min(q.cfg.FetchLimit, max(4*free, 64))
	q.mu.Lock()
	var picked []string
	seen := map[string]bool{}
	pick := func(queue []string, queued map[string]bool) []string {
		n := 0
		for n < len(queue) && len(picked) < limit {
			id := queue[n]
			n++
			delete(queued, id)
			if _, busy := q.inflight[id]; busy {
				q.told[id] = true // its Done queues it again
				continue
			}
			if !seen[id] {
				seen[id] = true
				picked = append(picked, id)
			}
		}
		if n == len(queue) {
			return nil // let the backing array go
		}
		return queue[n:]
	}
	q.queue = pick(q.queue, q.queued)
	q.sweeps = pick(q.sweeps, q.swept)
	q.mu.Unlock()
	held = make(map[string]claims.Claim, len(picked))
	ids = picked[:0]
	for _, id := range picked {
		if c, ok := q.eng.Holds(id); ok {
			if q.eng.Yielding(id) {
				continue // being given back: its next holder fetches it (the sweep, should the yield stop)
			}
			held[id] = c
			ids = append(ids, id)
		} else {
			elsewhere = append(elsewhere, id) // not ours (any more)
		}
	}
	return held, ids, elsewhere
}

// requeue puts service_ids back at the end of the queue.
func (q *Queuer) requeue(ids []string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, id := range ids {
		q.enqueueLocked(id)
	}
}

// requeueFront puts service_ids back at the front of the queue, in order: their heads are
// ready and waited only for a worker.
func (q *Queuer) requeueFront(ids []string) {
	if len(ids) == 0 {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	front := make([]string, 0, len(ids)+len(q.queue))
	for _, id := range ids {
		if !q.queued[id] {
			q.queued[id] = true
			front = append(front, id)
		}
	}
	q.queue = append(front, q.queue...)
}

// sweepTick queues what the Interval covers: every held claim with SweepAll, else the next
// FetchLimit held claims after the sweep's cursor (wrapping around), so that every claim is
// looked at now and then even if nothing said it had work.
func (q *Queuer) sweepTick() {
	if q.cfg.SweepAll {
		q.DirtyAll()
		return
	}
	held := q.eng.Held()
	q.mu.Lock()
	defer q.mu.Unlock()
	q.pruneFloorsLocked(held)
	start := sort.Search(len(held), func(i int) bool { return held[i].ServiceID > q.sweep })
	n := min(q.cfg.FetchLimit, len(held))
	for i := range n {
		id := held[(start+i)%len(held)].ServiceID
		q.sweepLocked(id)
		q.sweep = id
	}
}

// pruneFloorsLocked forgets the floors of service_ids no longer held, once there are more
// floors than held claims. A floor stays true after its claim moves (it is the database's
// order, not this instance's), so keeping one only costs memory.
func (q *Queuer) pruneFloorsLocked(held []claims.Claim) {
	if len(q.floors) <= len(held) {
		return
	}
	keep := make(map[string]bool, len(held))
	for _, c := range held {
		keep[c.ServiceID] = true
	}
	for id := range q.floors {
		if !keep[id] {
			delete(q.floors, id)
		}
	}
}

// decision is what to do with a head now.
type decision struct {
	reason batchclaim.Reason // hand it out for this reason (first | retry | resubmit)
	adopt  batchclaim.Reason // adopt it (a batch left in flight), with this detail
	wait   time.Duration     // look again after this long (a DELAYED, UNKNOWN or run-at head not yet ready)
}

// decide says whether the head h of c's service_id may go now, and why.
func (q *Queuer) decide(c claims.Claim, h observer.Head) decision {
	switch h.State {
	case batchclaim.StateNew:
		if !h.Due { // a run-at time ahead
			return decision{wait: h.DueIn}
		}
		return decision{reason: batchclaim.ReasonFirst}
	case batchclaim.StateDelayed:
		if h.Due {
			return decision{reason: batchclaim.ReasonRetry}
		}
		return decision{wait: h.DueIn}
	case batchclaim.StateUnknown:
		if h.UnknownFor >= q.cfg.UnknownGrace || h.UnknownCount >= q.cfg.UnknownAnswers {
			return decision{reason: batchclaim.ReasonResubmit}
		}
		// New answers from the ledger also make it ready; the recorder's write queues it then.
		return decision{wait: q.cfg.UnknownGrace - h.UnknownFor}
	case batchclaim.StateInflight:
		// Not ours in flight (those are never queued): the outcome of that POST is unknown.
		if h.ClaimEpoch == c.Epoch {
			return decision{adopt: batchclaim.ReasonLostTrack}
		}
		return decision{adopt: batchclaim.ReasonOwnerChanged}
	}
	return decision{} // PENDING, VALID: the poller's answers queue it
}

// awaitsLedger reports whether a head in state s that may not go now waits for the
// ledger's answer (rather than for a time, or for an operator).
func awaitsLedger(s batchclaim.State) bool {
	return s == batchclaim.StatePending || s == batchclaim.StateValid || s == batchclaim.StateUnknown
}

// at notes that id's head becomes ready at t.
func (q *Queuer) at(id string, t time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if old, ok := q.dueAt[id]; ok && !old.After(t) {
		return
	}
	q.dueAt[id] = t
	heap.Push(&q.due, dueEntry{id: id, at: t})
}

// arm sets timer to the earliest noted time.
func (q *Queuer) arm(timer *time.Timer) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for q.due.Len() > 0 {
		e := q.due[0]
		if q.dueAt[e.id].Equal(e.at) {
			timer.Reset(time.Until(e.at))
			return
		}
		heap.Pop(&q.due) // superseded
	}
	timer.Stop()
}

// fireDue queues the service_ids whose noted time has come.
func (q *Queuer) fireDue(now time.Time) {
	q.mu.Lock()
	for q.due.Len() > 0 && !q.due[0].at.After(now) {
		e := heap.Pop(&q.due).(dueEntry)
		if at, ok := q.dueAt[e.id]; ok && at.Equal(e.at) {
			delete(q.dueAt, e.id)
			q.enqueueLocked(e.id)
		}
	}
	q.mu.Unlock()
}

func batchOf(h observer.Head) batchclaim.Batch {
	return batchclaim.Batch{Seq: h.Seq, ServiceID: h.ServiceID, BatchID: h.BatchID, Attempts: h.Attempts}
}

type dueEntry struct {
	id string
	at time.Time
}

// dueHeap orders noted times, earliest first (container/heap).
type dueHeap []dueEntry

func (h dueHeap) Len() int           { return len(h) }
func (h dueHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h dueHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *dueHeap) Push(x any)        { *h = append(*h, x.(dueEntry)) }
func (h *dueHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}
