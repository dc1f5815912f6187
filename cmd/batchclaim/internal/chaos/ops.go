package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/dlt"
	"github.com/batchclaim/batchclaim/ingest"
	"github.com/batchclaim/batchclaim/observer"
	"github.com/batchclaim/batchclaim/testkit/history"
)

// OpRecord is one operation as the run recorded it, in the report and in operations.jsonl in
// the log directory.
type OpRecord struct {
	Kind string `json:"kind"`
	// At is when it took effect by the database clock (for a Retry, Cancel or enqueue the
	// now() of its transaction); End when it ended, for those that last.
	At       time.Time `json:"at"`
	End      time.Time `json:"end,omitzero"`
	Seq      int64     `json:"seq,omitempty"`
	Service  string    `json:"service_id,omitempty"`
	Instance string    `json:"instance,omitempty"`
	Result   string    `json:"result"`
	Err      string    `json:"error,omitempty"`
	// Acted: it did what its kind does (false: it found nothing to act on, or failed).
	Acted bool `json:"acted"`
}

// opServices are service_ids of the operations' own: the arrivals never store a batch for
// them, so once their jobs are finished they stay idle (their claim rows may be dropped) and
// a job revived there is not run by the arrival of another.
const opServices = 4

func opService(i int) string { return fmt.Sprintf("op-%d", i) }

// Operations' timings.
const (
	// retentionAge and retentionInterval are the --retention and --retention-interval of
	// the slots that retention_on turned on.
	retentionAge      = 30 * time.Second
	retentionInterval = time.Second
	// dropIdleOpAfter is the --drop-idle-after drop_idle_on turns on.
	dropIdleOpAfter = time.Second
)

// opsLane carries out operations of the configured kinds: first every kind once in an order
// drawn from the seed (a kind that found nothing to act on is tried again later, up to three
// times), then kinds at random until the deadline, with short random gaps.
func (r *run) opsLane(ctx context.Context, rng *rand.Rand, until time.Time) {
	pending := slices.Clone(r.cfg.Ops)
	rng.Shuffle(len(pending), func(i, j int) { pending[i], pending[j] = pending[j], pending[i] })
	tries := map[string]int{}
	for (len(pending) > 0 || time.Now().Before(until)) && ctx.Err() == nil {
		var kind string
		if len(pending) > 0 {
			kind, pending = pending[0], pending[1:]
		} else if kind = r.pickOp(rng, time.Until(until) > fleetOpRoom); kind == "" {
			r.sleep(ctx, time.Second)
			continue
		}
		rec := r.operate(ctx, kind, rng)
		if ctx.Err() != nil {
			return
		}
		r.note(rec)
		if !rec.Acted && tries[kind] < 3 && r.opCount(kind) == 0 {
			tries[kind]++
			pending = append(pending, kind)
		}
		r.sleep(ctx, time.Duration(500+rng.IntN(1500))*time.Millisecond)
	}
}

// fleetOpRoom is the time an operation that acts on the instances needs left before the
// deadline to be drawn in the random phase: each holds the host lane back while it lasts, and
// one drawn late would stretch the run.
const fleetOpRoom = 30 * time.Second

// operation is one kind of operation, a row of operations.
type operation struct {
	// weight is how often the random phase draws the kind, against the others' weights; 0:
	// never, the kind runs only in the first phase, where every configured kind runs once.
	weight int
	// fleet: the kind acts on the instances, and the random phase draws it only while the
	// run has fleetOpRoom left.
	fleet bool
	// idle, when set, says the kind can do nothing now: the random phase does not draw it.
	idle func(r *run) bool
	// apply carries out one operation of the kind.
	apply func(r *run, ctx context.Context, rng *rand.Rand) OpRecord
}

// operations are the operation kinds, each with how the random phase draws it and the
// function that carries it out. Which kinds a run carries out is the config's (Ops): the
// client operations are drawn more often than those that act on the instances.
var operations = map[string]operation{
	OpRetry:         {weight: 4, apply: (*run).opRetry},
	OpCancel:        {weight: 3, apply: (*run).opCancel},
	OpCancelRunning: {weight: 2, apply: (*run).opCancelRunning},
	OpRunAt:         {weight: 3, apply: (*run).opRunAt},
	OpResume:        {weight: 2, apply: (*run).opResume},
	OpRetentionOn: {weight: 1, fleet: true, apply: (*run).opRetentionOn,
		idle: func(r *run) bool { return r.slotWithoutRetention() == nil }},
	OpDropIdleOn:   {apply: func(r *run, ctx context.Context, _ *rand.Rand) OpRecord { return r.opDropIdleOn(ctx) }},
	OpPoolHog:      {weight: 1, fleet: true, apply: (*run).opPoolHog},
	OpLongSnapshot: {weight: 1, idle: (*run).snapshotOpen, apply: (*run).opLongSnapshot},
	OpClockDrift:   {weight: 1, fleet: true, apply: (*run).opClockDrift},
	OpHeldEnqueue:  {weight: 1, fleet: true, apply: (*run).opHeldEnqueue},
	OpClockRate: {weight: 1, fleet: true, apply: (*run).opClockRate,
		idle: func(r *run) bool { return r.slotWithoutRate() == nil }},
	OpUpgrade: {apply: (*run).opUpgrade},
}

// pickOp draws the next operation of the random phase among the configured kinds, each as
// often as its weight says, those that act on the instances only while fleet is true, and
// only kinds that can still do something.
func (r *run) pickOp(rng *rand.Rand, fleet bool) string {
	var bag []string
	for _, k := range r.cfg.Ops {
		op := operations[k]
		n := op.weight
		if (!fleet && op.fleet) || (op.idle != nil && op.idle(r)) {
			n = 0
		}
		for range n {
			bag = append(bag, k)
		}
	}
	if len(bag) == 0 {
		return ""
	}
	return bag[rng.IntN(len(bag))]
}

// operate carries out one operation.
func (r *run) operate(ctx context.Context, kind string, rng *rand.Rand) OpRecord {
	op, ok := operations[kind]
	if !ok {
		return OpRecord{Kind: kind, Result: "unknown operation"}
	}
	return op.apply(r, ctx, rng)
}

// note records an operation and says what it did.
func (r *run) note(rec OpRecord) {
	r.mu.Lock()
	r.ops = append(r.ops, rec)
	if rec.Acted {
		r.opCounts[rec.Kind]++
	}
	r.mu.Unlock()
	what := rec.Result
	if rec.Err != "" {
		what += " (" + rec.Err + ")"
	}
	r.event("op "+rec.Kind, "%s", what)
}

func (r *run) opCount(kind string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.opCounts[kind]
}

// writeOps writes every operation, one JSON object a line, to operations.jsonl in the log
// directory.
func (r *run) writeOps() error {
	r.mu.Lock()
	ops := slices.Clone(r.ops)
	r.mu.Unlock()
	f, err := os.Create(filepath.Join(r.logDir, "operations.jsonl"))
	if err != nil {
		return err
	}
	enc := json.NewEncoder(f)
	for _, o := range ops {
		if err := enc.Encode(o); err != nil {
			f.Close()
			return err
		}
	}
	return f.Close()
}

// candidate is a batch an operation may act on.
type candidate struct {
	seq     int64
	service string
	state   batchclaim.State
	age     float64 // seconds since it finished (0 for an unfinished one)
}

// candidates lists the batches in the given states, by seq.
func (r *run) candidates(ctx context.Context, states ...batchclaim.State) ([]candidate, error) {
	qctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	names := make([]string, len(states))
	for i, s := range states {
		names[i] = string(s)
	}
	rows, err := r.pool.Query(qctx, `SELECT seq, service_id, state, COALESCE(EXTRACT(EPOCH FROM now() - finished_at), 0)::float8
		FROM batchclaim.batches WHERE state = ANY($1) ORDER BY seq`, names)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []candidate
	for rows.Next() {
		var c candidate
		var st string
		if err := rows.Scan(&c.seq, &c.service, &st, &c.age); err != nil {
			return nil, err
		}
		c.state = batchclaim.State(st)
		out = append(out, c)
	}
	return out, rows.Err()
}

func isOpService(svc string) bool { return len(svc) > 3 && svc[:3] == "op-" }

// opRetry retries a DISCARDED, CANCELLED, INVALID or DELAYED batch, chosen in one of three
// ways: any of them; one of the operations' own service_ids (idle: its claim row may have
// been dropped, and no arrival will bring it back); or the one that finished first, which
// retention deletes soonest: then the retry waits until the batch is about to be old enough
// for retention and holds its transaction open briefly, so that a retention run may meet it.
// The retry is a client's transaction; the run notes the job as revived once it committed.
func (r *run) opRetry(ctx context.Context, rng *rand.Rand) OpRecord {
	rec := OpRecord{Kind: OpRetry}
	cands, err := r.candidates(ctx, batchclaim.StateDiscarded, batchclaim.StateCancelled, batchclaim.StateInvalid, batchclaim.StateDelayed)
	if err != nil {
		rec.Result, rec.Err = "no candidates read", err.Error()
		return rec
	}
	if len(cands) == 0 {
		rec.Result = "nothing to retry"
		return rec
	}
	c := cands[rng.IntN(len(cands))]
	var hold time.Duration
	how := "any"
	switch rng.IntN(3) {
	case 1:
		idle := slices.DeleteFunc(slices.Clone(cands), func(c candidate) bool { return !isOpService(c.service) })
		if len(idle) > 0 {
			c, how = idle[rng.IntN(len(idle))], "idle service_id"
		}
	case 2:
		done := slices.DeleteFunc(slices.Clone(cands), func(c candidate) bool { return c.state == batchclaim.StateDelayed })
		if len(done) > 0 {
			c, how = done[0], "oldest"
			for _, d := range done {
				if d.age > c.age {
					c = d
				}
			}
			if r.retentionOn() {
				wait := time.Duration((retentionAge.Seconds()-c.age)*float64(time.Second)) - 50*time.Millisecond
				r.sleep(ctx, min(max(wait, 0), 10*time.Second))
				hold, how = time.Duration(50+rng.IntN(100))*time.Millisecond, "oldest, as retention may take it"
			}
		}
	}
	rec.Seq, rec.Service = c.seq, c.service
	var ch observer.Change
	var at time.Time
	err = pgx.BeginFunc(ctx, r.pool, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `SELECT now()`).Scan(&at); err != nil {
			return err
		}
		var err error
		if ch, err = observer.Retry(ctx, tx, c.seq); err != nil {
			return err
		}
		r.sleep(ctx, hold)
		return nil
	})
	rec.At = at
	switch {
	case errors.Is(err, batchclaim.ErrStateChanged):
		rec.Result, rec.Acted = fmt.Sprintf("seq %d (%s, %s) moved on first: %v", c.seq, c.state, how, err), true
	case err != nil:
		rec.Result, rec.Err = fmt.Sprintf("seq %d (%s, %s) not retried", c.seq, c.state, how), err.Error()
	default:
		rec.Result, rec.Acted = fmt.Sprintf("seq %d of %s retried (%s): %s -> %s", c.seq, c.service, how, ch.From, ch.To), true
		if ch.Resumed {
			rec.Result += ", its halt lifted"
		}
		if hold > 0 {
			rec.Result += fmt.Sprintf(", transaction held %v", hold)
		}
		r.mu.Lock()
		r.promises = append(r.promises, history.Promise{Kind: history.PromiseRevived, Seq: c.seq, At: at})
		r.mu.Unlock()
	}
	return rec
}

// opCancel cancels a NEW or DELAYED batch: one of those stored (a race with its owner's
// in-flight mark, which either side may win), or one it stores itself for one of the
// operations' own service_ids with a run-at time well ahead (so that the cancel wins, and the
// service_id is left idle with a CANCELLED job to retry).
func (r *run) opCancel(ctx context.Context, rng *rand.Rand) OpRecord {
	rec := OpRecord{Kind: OpCancel}
	var c candidate
	how := "stored"
	cands, err := r.candidates(ctx, batchclaim.StateNew, batchclaim.StateDelayed)
	if err != nil {
		rec.Result, rec.Err = "no candidates read", err.Error()
		return rec
	}
	if len(cands) > 0 && rng.IntN(2) == 0 {
		c = cands[rng.IntN(len(cands))]
	} else {
		svc := opService(rng.IntN(opServices))
		at, err := r.dbNow(ctx)
		if err != nil {
			rec.Result, rec.Err = "no database time", err.Error()
			return rec
		}
		seq, err := r.enqueueOp(ctx, svc, at.Add(30*time.Second))
		if err != nil {
			rec.Result, rec.Err = "nothing stored to cancel", err.Error()
			return rec
		}
		c, how = candidate{seq: seq, service: svc, state: batchclaim.StateNew}, "stored to cancel, due in 30s"
	}
	rec.Seq, rec.Service = c.seq, c.service
	var ch observer.Change
	err = pgx.BeginFunc(ctx, r.pool, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `SELECT now()`).Scan(&rec.At); err != nil {
			return err
		}
		var err error
		ch, err = observer.Cancel(ctx, tx, c.seq, "chaos: cancel")
		return err
	})
	switch {
	case errors.Is(err, batchclaim.ErrStateChanged):
		rec.Result, rec.Acted = fmt.Sprintf("seq %d (%s) moved on first: %v", c.seq, how, err), true
	case err != nil:
		rec.Result, rec.Err = fmt.Sprintf("seq %d (%s) not cancelled", c.seq, how), err.Error()
	case ch.CancelRequested:
		rec.Result, rec.Acted = fmt.Sprintf("seq %d of %s (%s) started first: cancel requested while it runs", c.seq, c.service, how), true
	default:
		rec.Result, rec.Acted = fmt.Sprintf("seq %d of %s (%s) cancelled from %s", c.seq, c.service, how, ch.From), true
	}
	return rec
}

// opRunAt stores a batch with a run-at time 1-5 s ahead, for an arrivals' service_id (whose
// later batches wait behind it) or one of the operations' own.
func (r *run) opRunAt(ctx context.Context, rng *rand.Rand) OpRecord {
	rec := OpRecord{Kind: OpRunAt}
	svc := serviceID(rng.IntN(r.cfg.ServiceIDs))
	if rng.IntN(3) == 0 {
		svc = opService(rng.IntN(opServices))
	}
	now, err := r.dbNow(ctx)
	if err != nil {
		rec.Result, rec.Err = "no database time", err.Error()
		return rec
	}
	runAt := now.Add(time.Duration(1000+rng.IntN(4000)) * time.Millisecond)
	seq, err := r.enqueueOp(ctx, svc, runAt)
	rec.At, rec.Service, rec.Seq = now, svc, seq
	if err != nil {
		rec.Result, rec.Err = "not stored", err.Error()
		return rec
	}
	rec.Result, rec.Acted = fmt.Sprintf("seq %d of %s stored to run at %s (in %.1fs)", seq, svc, clock(runAt), runAt.Sub(now).Seconds()), true
	return rec
}

// enqueueOp stores the next batch of svc with a run-at time and returns its seq.
func (r *run) enqueueOp(ctx context.Context, svc string, runAt time.Time) (int64, error) {
	n := r.numbers.take(svc)
	id, list := dlt.FakeBatch(svc, n)
	qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	st, err := ingest.Enqueue(qctx, r.pool, svc, id, list, ingest.RunAt(runAt))
	if err != nil {
		return 0, err
	}
	r.noteStored(svc, n, stored{done: time.Now(), via: "an operation"})
	r.arrived.Add(1)
	return st.Seq, nil
}

// opResume lifts the halt of a service_id halted by an INVALID batch (runs with
// --halt-on-invalid only).
func (r *run) opResume(ctx context.Context, rng *rand.Rand) OpRecord {
	rec := OpRecord{Kind: OpResume}
	halts, err := observer.Halts(ctx, r.pool)
	if err != nil {
		rec.Result, rec.Err = "halts not read", err.Error()
		return rec
	}
	if len(halts) == 0 {
		rec.Result = "no service_id halted"
		return rec
	}
	h := halts[rng.IntN(len(halts))]
	rec.At, _ = r.dbNow(ctx)
	rec.Service, rec.Seq = h.ServiceID, h.Seq
	if _, err := observer.Resume(ctx, r.pool, h.ServiceID); err != nil {
		rec.Result, rec.Err = fmt.Sprintf("%s not resumed", h.ServiceID), err.Error()
		if errors.Is(err, batchclaim.ErrNotFound) {
			rec.Acted = true // resumed by a retry of its INVALID batch meanwhile
		}
		return rec
	}
	rec.Result, rec.Acted = fmt.Sprintf("%s resumed (halted by seq %d at %s)", h.ServiceID, h.Seq, clock(h.At)), true
	return rec
}

// resumeAll lifts every halt, so that quiescence can finish every batch of a run with
// --halt-on-invalid. It returns how many it lifted.
func (r *run) resumeAll(ctx context.Context) int {
	halts, err := observer.Halts(ctx, r.pool)
	if err != nil {
		return 0
	}
	n := 0
	for _, h := range halts {
		if _, err := observer.Resume(ctx, r.pool, h.ServiceID); err == nil {
			n++
		}
	}
	return n
}

// dbNow reads the database's clock.
func (r *run) dbNow(ctx context.Context) (time.Time, error) {
	qctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	var t time.Time
	err := r.pool.QueryRow(qctx, `SELECT now()`).Scan(&t)
	return t, err
}
