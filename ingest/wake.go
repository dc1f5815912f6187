package ingest

import (
	"context"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batchclaim/batchclaim/internal/db"
	"github.com/batchclaim/batchclaim/pgdb"
)

// Waking the holder of a service_id after its enqueue commits.
//
// A statement that stores batches in a transaction of the caller's notifies the holders
// (the trigger batchclaim_notify_work) when that transaction commits. Postgres serializes the
// commits of every transaction that notified, the flush of its commit record included, under
// one lock: an enqueue per transaction, each notifying, cannot share a WAL flush with another,
// and the rate of single enqueues is one commit flush after another (docs/performance.md).
// So an enqueue that is its own transaction (Enqueue given a pool) commits without notifying,
// and the wake-ups of the enqueues that committed on one pool are sent together just after,
// by one statement of a transaction whose commit is asynchronous: it writes nothing but the
// notifications, and a notification lost in a crash delays its job until the holder's safety
// sweep (at most its renew interval), as a notification missed while not listening does.

// wakeSendTimeout bounds one statement that sends wake-ups.
const wakeSendTimeout = 5 * time.Second

// commitsAlone reports whether a statement run through q is a transaction of its own: q is a
// pool (maybe in another schema), not a transaction or a connection the caller may have
// opened one on.
func commitsAlone(q pgdb.Querier) bool {
	_, ok := pgdb.Unwrap(q).(*pgxpool.Pool)
	return ok
}

// wakeKey names a wake group: one pool, one schema.
type wakeKey struct {
	pool   *pgxpool.Pool
	schema string
}

// wakeGroup sends the wake-ups of one pool's committed enqueues: at most one statement at a
// time, carrying every service_id that arrived while the previous one was out.
type wakeGroup struct {
	key     wakeKey
	q       pgdb.Querier
	mu      sync.Mutex
	pending map[string]struct{}
	sending bool
	gone    bool // removed from wakeGroups: a new group takes its place
}

var wakeGroups sync.Map // wakeKey -> *wakeGroup

// wakeAfterCommit has the holders of serviceIDs woken, soon, by a statement of its own on q
// (a pool: see commitsAlone), after the enqueue that stored their batches committed. It does
// not wait for the statement.
func wakeAfterCommit(ctx context.Context, q pgdb.Querier, serviceIDs ...string) {
	key := wakeKey{pool: pgdb.Unwrap(q).(*pgxpool.Pool), schema: pgdb.SchemaOf(q)}
	for {
		v, _ := wakeGroups.LoadOrStore(key, &wakeGroup{key: key, q: q, pending: map[string]struct{}{}})
		g := v.(*wakeGroup)
		g.mu.Lock()
		if g.gone {
			g.mu.Unlock()
			continue
		}
		for _, id := range serviceIDs {
			g.pending[id] = struct{}{}
		}
		start := !g.sending
		g.sending = true
		g.mu.Unlock()
		if start {
			go g.send(context.WithoutCancel(ctx))
		}
		return
	}
}

// send sends the pending wake-ups, one statement at a time, until none is pending; then the
// group leaves wakeGroups, so that a pool closed for good leaves nothing behind. A failed
// statement is not retried: the holders' safety sweep finds the jobs.
func (g *wakeGroup) send(ctx context.Context) {
	for {
		g.mu.Lock()
		if len(g.pending) == 0 {
			g.sending, g.gone = false, true
			wakeGroups.CompareAndDelete(g.key, g)
			g.mu.Unlock()
			return
		}
		ids := make([]string, 0, len(g.pending))
		for id := range g.pending {
			ids = append(ids, id)
		}
		clear(g.pending)
		g.mu.Unlock()
		sctx, cancel := context.WithTimeout(ctx, wakeSendTimeout)
		_ = db.New().BatchesWake(sctx, g.q, ids)
		cancel()
	}
}
