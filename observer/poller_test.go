package observer_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/claims"
	"github.com/batchclaim/batchclaim/ingest"
	"github.com/batchclaim/batchclaim/observer"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// source is a StatusSource with fixed answers that records what it was asked.
type source struct {
	mu     sync.Mutex
	asked  [][]string
	answer map[string]batchclaim.Status
	extra  string // an id the ledger mentions without being asked
}

func (s *source) Statuses(_ context.Context, ids []string) ([]batchclaim.LedgerStatus, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.asked = append(s.asked, ids)
	var out []batchclaim.LedgerStatus
	for _, id := range ids {
		if st, ok := s.answer[id]; ok {
			out = append(out, batchclaim.LedgerStatus{ID: id, Status: st})
		}
	}
	if s.extra != "" {
		out = append(out, batchclaim.LedgerStatus{ID: s.extra, Status: batchclaim.StatusCommitted})
	}
	return out, nil
}

func TestPollerRecordsAnswersForClaimedServiceIDsOnly(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.NewPool(t)
	for _, b := range []struct{ svc, id, state string }{
		{"mine", "p1", "PENDING"}, {"mine", "p2", "PENDING"}, {"mine", "u1", "UNKNOWN"}, {"mine", "n1", "NEW"},
		{"other", "o1", "PENDING"}, // claimed by another instance: never asked about
	} {
		s, err := ingest.Enqueue(ctx, pool, b.svc, b.id, []byte("x"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := pool.Exec(ctx, `UPDATE batchclaim.batches SET state = $1 WHERE seq = $2`, b.state, s.Seq); err != nil {
			t.Fatal(err)
		}
	}
	newEngine := func(name string) *claims.Engine {
		e, err := claims.New(dbtest.Open(t, pool, ""), claims.Config{Name: name})
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Register(ctx); err != nil {
			t.Fatal(err)
		}
		return e
	}
	me, other := newEngine("me"), newEngine("other")
	if _, err := pool.Exec(ctx, `UPDATE batchclaim.service_id_claims SET claimant = $1, epoch = 1 WHERE service_id = 'mine'`, me.InstanceID()); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `UPDATE batchclaim.service_id_claims SET claimant = $1, epoch = 1 WHERE service_id = 'other'`, other.InstanceID()); err != nil {
		t.Fatal(err)
	}
	if _, err := me.Cycle(ctx); err != nil { // adopts 'mine' from the database
		t.Fatal(err)
	}

	var changes []observer.Transition
	rec := mustRecorder(t, pool, me, observer.RecorderConfig{Events: &observer.Events{
		StatusChanged: func(tr observer.Transition) { changes = append(changes, tr) },
	}})
	src := &source{answer: map[string]batchclaim.Status{
		"p1": batchclaim.StatusCommitted, "p2": batchclaim.StatusPending, "u1": batchclaim.StatusUnknown,
	}, extra: "o1"}
	p, err := observer.NewPoller(dbtest.Open(t, pool, ""), me, rec, src, observer.PollerConfig{})
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
		if err := pool.QueryRow(ctx, `SELECT state, unknown_count FROM batchclaim.batches WHERE batch_id = $1`, id).Scan(&st, &unknown); err != nil {
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

// claimedPending stores one PENDING batch (id "<svc>-b<k>") per batch count of each of
// services service_ids, gives all of them to a single registered engine and returns it.
func claimedPending(t *testing.T, pool *pgxpool.Pool, services int, perService func(i int) int) (*claims.Engine, []string) {
	t.Helper()
	ctx := t.Context()
	var ids []string
	for i := range services {
		svc := fmt.Sprintf("svc-%04d", i)
		for k := range perService(i) {
			id := fmt.Sprintf("%s-b%d", svc, k)
			s, err := ingest.Enqueue(ctx, pool, svc, id, []byte("x"))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := pool.Exec(ctx, `UPDATE batchclaim.batches SET state = 'PENDING' WHERE seq = $1`, s.Seq); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
	}
	e, err := claims.New(dbtest.Open(t, pool, ""), claims.Config{Name: "me"})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Register(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `UPDATE batchclaim.service_id_claims SET claimant = $1, epoch = 1`, e.InstanceID()); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Cycle(ctx); err != nil {
		t.Fatal(err)
	}
	if got := len(e.Held()); got != services {
		t.Fatalf("engine holds %d claims, want %d", got, services)
	}
	return e, ids
}

// More open batches than one poll reads: the poller rotates through them, so every batch
// of every claimed service_id is asked about within ceil(open/MaxBatches)+1 polls, and no
// poll reads more than MaxBatches.
func TestPollerRotatesThroughAllServiceIDs(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.NewPool(t)
	// 40 service_ids, every fifth with 3 batches to ask about: 56 batches.
	me, ids := claimedPending(t, pool, 40, func(i int) int { return 1 + 2*btoi(i%5 == 0) })
	const perPoll = 7
	src := &source{answer: map[string]batchclaim.Status{}} // no answer: everything stays PENDING
	p, err := observer.NewPoller(dbtest.Open(t, pool, ""), me, mustRecorder(t, pool, me, observer.RecorderConfig{}), src,
		observer.PollerConfig{MaxBatches: perPoll})
	if err != nil {
		t.Fatal(err)
	}
	rounds := (len(ids)+perPoll-1)/perPoll + 1
	asked := map[string]int{}
	for r := range rounds {
		src.asked = nil
		n, err := p.PollOnce(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n > perPoll {
			t.Fatalf("poll %d asked about %d batches, more than MaxBatches %d", r, n, perPoll)
		}
		for _, req := range src.asked {
			for _, id := range req {
				asked[id]++
			}
		}
	}
	var never []string
	for _, id := range ids {
		if asked[id] == 0 {
			never = append(never, id)
		}
	}
	if len(never) > 0 {
		t.Fatalf("after %d polls of at most %d batches, %d of %d batches were never asked about (first: %v)",
			rounds, perPoll, len(never), len(ids), never[:min(5, len(never))])
	}
}

// Ids of different service_ids share a status request: 20 service_ids with one batch each
// need two requests of at most 15 ids (the Sawtooth limit), not 20 requests of one.
func TestPollerPacksIDsOfSeveralServiceIDsPerRequest(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.NewPool(t)
	me, ids := claimedPending(t, pool, 20, func(int) int { return 1 })
	answer := map[string]batchclaim.Status{}
	for _, id := range ids {
		answer[id] = batchclaim.StatusCommitted
	}
	src := &source{answer: answer}
	p, err := observer.NewPoller(dbtest.Open(t, pool, ""), me, mustRecorder(t, pool, me, observer.RecorderConfig{}), src, observer.PollerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := p.PollOnce(ctx); err != nil || n != len(ids) {
		t.Fatalf("PollOnce asked about %d batches (err %v), want %d", n, err, len(ids))
	}
	if len(src.asked) != 2 {
		t.Fatalf("%d status requests for %d batches of %d service_ids, want 2 (ids packed across service_ids, at most %d a request)",
			len(src.asked), len(ids), len(ids), observer.PollIDsPerRequestDefault)
	}
	seen := map[string]bool{}
	for _, req := range src.asked {
		if len(req) > observer.PollIDsPerRequestDefault {
			t.Errorf("a request carried %d ids, more than %d", len(req), observer.PollIDsPerRequestDefault)
		}
		for _, id := range req {
			seen[id] = true
		}
	}
	if len(seen) != len(ids) {
		t.Fatalf("asked about %d distinct ids, want %d", len(seen), len(ids))
	}
	var committed int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM batchclaim.batches WHERE state = 'COMMITTED'`).Scan(&committed); err != nil {
		t.Fatal(err)
	}
	if committed != len(ids) {
		t.Fatalf("%d batches recorded COMMITTED, want %d: each answer goes to its own service_id's claim", committed, len(ids))
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Between sweeps a poll asks only about the service_ids it was told of (Note) or found
// something to ask about before: one with nothing left is not read again until it is noted.
func TestPollerAsksAboutServiceIDsItKnowsOf(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.NewPool(t)
	me, ids := claimedPending(t, pool, 2, func(int) int { return 1 }) // svc-0000-b0, svc-0001-b0
	src := &source{answer: map[string]batchclaim.Status{ids[0]: batchclaim.StatusCommitted, ids[1]: batchclaim.StatusPending}}
	p, err := observer.NewPoller(dbtest.Open(t, pool, ""), me, mustRecorder(t, pool, me, observer.RecorderConfig{}), src,
		observer.PollerConfig{SweepInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	asked := func() string {
		t.Helper()
		src.mu.Lock()
		src.asked = nil
		src.mu.Unlock()
		if _, err := p.PollOnce(ctx); err != nil {
			t.Fatal(err)
		}
		var all []string
		for _, req := range src.asked {
			all = append(all, req...)
		}
		sort.Strings(all)
		return strings.Join(all, ",")
	}
	if got := asked(); got != ids[0]+","+ids[1] {
		t.Fatalf("first poll (a sweep) asked %q, want both", got)
	}
	if got := asked(); got != ids[1] {
		t.Fatalf("second poll asked %q, want only %s (svc-0000 has nothing left)", got, ids[1])
	}
	// A new batch of svc-0000 awaits the ledger, but nobody said so: not asked until noted.
	s, err := ingest.Enqueue(ctx, pool, "svc-0000", "svc-0000-b1", []byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `UPDATE batchclaim.batches SET state = 'PENDING' WHERE seq = $1`, s.Seq); err != nil {
		t.Fatal(err)
	}
	if got := asked(); got != ids[1] {
		t.Fatalf("third poll asked %q, want only %s", got, ids[1])
	}
	p.Note("svc-0000")
	if got := asked(); got != "svc-0000-b1,"+ids[1] {
		t.Fatalf("after Note: asked %q, want svc-0000-b1 and %s", got, ids[1])
	}
}
