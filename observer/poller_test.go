package observer_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/claims"
	"github.com/batchclaim/batchclaim/ingest"
	"github.com/batchclaim/batchclaim/internal/dbtest"
	"github.com/batchclaim/batchclaim/observer"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// source is a StatusSource with fixed answers that records what it was asked.
type source struct {
	mu     sync.Mutex
	asked  [][]string
	answer map[string]batchclaim.Status
	extra  string // an id the ledger mentions without being asked
}

func (s *source) Statuses(_ context.Context, ids []string) ([]observer.LedgerStatus, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.asked = append(s.asked, ids)
	var out []observer.LedgerStatus
	for _, id := range ids {
		if st, ok := s.answer[id]; ok {
			out = append(out, observer.LedgerStatus{ID: id, Status: st})
		}
	}
	if s.extra != "" {
		out = append(out, observer.LedgerStatus{ID: s.extra, Status: batchclaim.StatusCommitted})
	}
	return out, nil
}

func TestPollerRecordsAnswersForClaimedServiceIDsOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.NewPool(t)
	for _, b := range []struct{ svc, id, state string }{
		{"mine", "p1", "PENDING"}, {"mine", "p2", "PENDING"}, {"mine", "u1", "UNKNOWN"}, {"mine", "n1", "NEW"},
		{"other", "o1", "PENDING"}, // claimed by another instance: never asked about
	} {
		s, err := ingest.Enqueue(ctx, pool, b.svc, b.id, []byte("x"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := pool.Exec(ctx, `UPDATE batches SET state = $1 WHERE seq = $2`, b.state, s.Seq); err != nil {
			t.Fatal(err)
		}
	}
	newEngine := func(name string) *claims.Engine {
		e, err := claims.New(pool, claims.Config{Name: name})
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Register(ctx); err != nil {
			t.Fatal(err)
		}
		return e
	}
	me, other := newEngine("me"), newEngine("other")
	if _, err := pool.Exec(ctx, `UPDATE service_id_claims SET claimant = $1, epoch = 1 WHERE service_id = 'mine'`, me.InstanceID()); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `UPDATE service_id_claims SET claimant = $1, epoch = 1 WHERE service_id = 'other'`, other.InstanceID()); err != nil {
		t.Fatal(err)
	}
	if _, err := me.Cycle(ctx); err != nil { // adopts 'mine' from the database
		t.Fatal(err)
	}

	var changes []observer.Transition
	rec := observer.NewRecorder(pool, me, observer.RecorderConfig{Events: &observer.Events{
		StatusChanged: func(tr observer.Transition) { changes = append(changes, tr) },
	}})
	src := &source{answer: map[string]batchclaim.Status{
		"p1": batchclaim.StatusCommitted, "p2": batchclaim.StatusPending, "u1": batchclaim.StatusUnknown,
	}, extra: "o1"}
	p, err := observer.NewPoller(pool, me, rec, src, observer.PollerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := p.PollOnce(ctx); err != nil || n != 3 {
		t.Fatalf("PollOnce asked about %d batches (err %v), want 3", n, err)
	}
	if got := strings.Join(src.asked[0], ","); len(src.asked) != 1 || got != "p1,p2,u1" {
		t.Fatalf("asked %v, want one request for p1,p2,u1 (the unfinished batches of the claimed service_id)", src.asked)
	}
	state := func(id string) (st string, unknown int) {
		if err := pool.QueryRow(ctx, `SELECT state, unknown_count FROM batches WHERE batch_id = $1`, id).Scan(&st, &unknown); err != nil {
			t.Fatal(err)
		}
		return st, unknown
	}
	for _, c := range []struct {
		id, want string
		unknown  int
	}{{"p1", "COMMITTED", 0}, {"p2", "PENDING", 0}, {"u1", "UNKNOWN", 1}, {"n1", "NEW", 0}, {"o1", "PENDING", 0}} {
		if st, u := state(c.id); st != c.want || u != c.unknown {
			t.Errorf("%s: %s with %d UNKNOWN answers, want %s with %d", c.id, st, u, c.want, c.unknown)
		}
	}
	if len(changes) != 1 || changes[0].BatchID != "p1" || changes[0].To != batchclaim.StateCommitted {
		t.Fatalf("status changes reported: %+v, want only p1 -> COMMITTED", changes)
	}
}
