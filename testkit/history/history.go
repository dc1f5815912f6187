package history

import (
	"context"
	"fmt"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/internal/db"
	"github.com/batchclaim/batchclaim/pgdb"
)

// Ledger is the ledger's record (a dltsim.Sim).
type Ledger struct {
	// Committed lists batch ids in the order the ledger committed them.
	Committed []string
	// Effective counts, per batch id, the POSTs that reached the ledger and took effect or
	// found the batch already known (posts refused with 429/503 or timed out are not counted).
	Effective map[string]int
}

// Report is what Check found.
type Report struct {
	Batches, Committed, Invalid, Open int
	// Cancelled and Discarded: batches finished without reaching the ledger's chain (a Cancel,
	// or no attempts left).
	Cancelled, Discarded int
	// Deleted: batches retention deleted, read from the audit (InstallAudit); each still
	// counts for order and duplicates.
	Deleted int
	// Lost: batches not finished, or recorded COMMITTED that the ledger does not have.
	Lost int
	// OrderViolations: batches the ledger committed before an earlier batch of the same
	// service_id: earlier by pos (a batch revived by a Retry goes to the back of its queue),
	// or by seq on a schema without pos, where a revived batch is not judged.
	OrderViolations int
	// DuplicatePosts: POSTs of a batch after the first that took effect.
	DuplicatePosts int
	// DuplicatePostsUnexplained: duplicates not explained by an earlier submission whose
	// outcome nobody saw, or by the ledger saying it did not know an accepted batch.
	DuplicatePostsUnexplained int
	// Reordered lists each order violation: Early (smaller seq) committed by the ledger after
	// Late.
	Reordered []Reorder
	// Unexplained lists the batch ids with unexplained duplicate POSTs.
	Unexplained []string
	Problems    []string // the first few, for messages
}

// Reorder is one order violation of one service_id.
type Reorder struct {
	Service           string
	EarlyID, LateID   string
	EarlySeq, LateSeq int64
}

func (r *Report) problem(format string, a ...any) {
	if len(r.Problems) < 20 {
		r.Problems = append(r.Problems, fmt.Sprintf(format, a...))
	}
}

// Check compares the database with the ledger's record.
func Check(ctx context.Context, q pgdb.Querier, l Ledger) (Report, error) {
	var r Report
	onChain := make(map[string]bool, len(l.Committed))
	for _, id := range l.Committed {
		onChain[id] = true
	}
	qs := db.New()
	rows, err := qs.BatchSeqs(ctx, q)
	if err != nil {
		return r, err
	}
	for _, b := range rows {
		st := batchclaim.State(b.State)
		r.Batches++
		switch {
		case st == batchclaim.StateCommitted:
			r.Committed++
			if !onChain[b.BatchID] {
				r.Lost++
				r.problem("batch %s (%s seq %d) recorded COMMITTED but not committed by the ledger", short(b.BatchID), b.ServiceID, b.Seq)
			}
		case st == batchclaim.StateInvalid:
			r.Invalid++
		case st == batchclaim.StateCancelled:
			r.Cancelled++
		case st == batchclaim.StateDiscarded:
			r.Discarded++
		default:
			r.Open++
			r.Lost++
			r.problem("batch %s (%s seq %d) not finished: %s", short(b.BatchID), b.ServiceID, b.Seq, st)
		}
	}
	places, err := readPlaces(ctx, q)
	if err != nil {
		return r, err
	}
	r.Deleted = places.deleted
	type placed struct {
		seq, pos int64
		id       string
	}
	last := map[string]placed{}
	for _, id := range l.Committed {
		p, ok := places.byID[id]
		if !ok || p.skip {
			continue
		}
		if l := last[p.svc]; l.id != "" && p.pos < l.pos {
			r.OrderViolations++
			r.Reordered = append(r.Reordered, Reorder{Service: p.svc, EarlyID: id, EarlySeq: p.seq, LateID: l.id, LateSeq: l.seq})
			r.problem("%s: seq %d committed after seq %d", p.svc, p.seq, l.seq)
		}
		if l := last[p.svc]; l.id == "" || p.pos > l.pos {
			last[p.svc] = placed{seq: p.seq, pos: p.pos, id: id}
		}
	}
	expl, err := qs.DuplicateExplainers(ctx, q)
	if err != nil {
		return r, err
	}
	explainers := make(map[string]int, len(expl))
	for _, e := range expl {
		explainers[e.BatchID] = int(e.Explainers)
	}
	if err := moreExplainers(ctx, q, explainers); err != nil {
		return r, err
	}
	for id, n := range l.Effective {
		if n <= 1 {
			continue
		}
		r.DuplicatePosts += n - 1
		if u := n - 1 - explainers[id]; u > 0 {
			r.DuplicatePostsUnexplained += u
			r.Unexplained = append(r.Unexplained, id)
			r.problem("batch %s posted %d times with %d unknown outcomes to explain it", short(id), n, explainers[id])
		}
	}
	return r, nil
}

func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// TookEffect reports whether a POST with this simulator effect reached the ledger's record:
// accepted, a repeat of a known batch, accepted with its answer lost, or accepted with a 503
// saying the outcome is unknown (Sawtooth code 17). Refused (429, 503) and timed-out POSTs did
// not.
func TookEffect(effect string) bool {
	return effect == "accepted" || effect == "duplicate" || effect == "dropped-response" || effect == "accepted-error"
}

// SimLedger builds a Ledger from a simulator's record: committed ids in commit order and
// (batch id, effect) pairs of every POST.
func SimLedger(committed []string, posts func(yield func(batchID, effect string) bool)) Ledger {
	l := Ledger{Committed: committed, Effective: map[string]int{}}
	for id, effect := range posts {
		if TookEffect(effect) {
			l.Effective[id]++
		}
	}
	return l
}
