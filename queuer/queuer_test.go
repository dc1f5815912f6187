package queuer_test

import (
	"context"
	"errors"
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
	"github.com/batchclaim/batchclaim/pgdb"
	"github.com/batchclaim/batchclaim/queuer"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// dispatcher records what the queuer hands out.
type dispatcher struct {
	mu   sync.Mutex
	free int
	mem  int64 // payload bytes the jobs may hold; 0: no bound
	got  []batchclaim.Job
}

func (d *dispatcher) FreeMemory() (int64, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.mem == 0 {
		return 1 << 62, len(d.got) == 0
	}
	held := int64(0)
	for _, j := range d.got {
		held += int64(len(j.Batch.Payload))
	}
	return d.mem - held, len(d.got) == 0
}

func (d *dispatcher) Free() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.free - len(d.got)
}

func (d *dispatcher) TrySubmit(w batchclaim.Job) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.free == len(d.got) {
		return false
	}
	d.got = append(d.got, w)
	return true
}

func (d *dispatcher) handedOut() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var got []string
	for _, j := range d.got {
		got = append(got, j.Claim.ServiceID)
	}
	sort.Strings(got)
	return got
}

// recorder marks in flight for real and records adoptions instead of making them; while
// adoptErr is set, adoptions fail with it.
type recorder struct {
	*observer.Recorder
	adopted  []int64
	adoptErr error
}

func newRecorder(t testing.TB, pool *pgxpool.Pool, eng *claims.Engine) *recorder {
	t.Helper()
	rec, err := observer.NewRecorder(dbtest.Open(t, pool, ""), eng, observer.RecorderConfig{})
	if err != nil {
		t.Fatal(err)
	}
	return &recorder{Recorder: rec}
}

func (a *recorder) Adopt(_ context.Context, jobs []batchclaim.Job) error {
	if a.adoptErr != nil {
		return a.adoptErr
	}
	for _, j := range jobs {
		a.adopted = append(a.adopted, j.Batch.Seq)
	}
	return nil
}

// Each case stores two batches of one service_id, puts the first (the head) in a state, and
// says what one Fetch must hand out.
func TestFetchPolicy(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		head       string // SQL SET clause for the head batch ("" leaves it NEW)
		halt       bool
		wantReason batchclaim.Reason // "" = nothing handed out
		wantAdopt  bool
		wantAwait  bool // Config.Awaiting is told of the service_id: the poller asks about its head
	}{
		{name: "new head goes first", wantReason: "first"},
		{name: "pending head waits for the ledger", head: "state = 'PENDING'", wantAwait: true},
		{name: "valid head waits for commit", head: "state = 'VALID'", wantAwait: true},
		{name: "delayed head waits for next_attempt_at", head: "state = 'DELAYED', next_attempt_at = now() + interval '1 hour'"},
		{name: "delayed head goes once due", head: "state = 'DELAYED', next_attempt_at = now() - interval '1 second'", wantReason: "retry"},
		{name: "fresh unknown head waits", head: "state = 'UNKNOWN', unknown_count = 1, status_updated_at = now()", wantAwait: true},
		{name: "unknown head resubmitted after K answers", head: "state = 'UNKNOWN', unknown_count = 3, status_updated_at = now()", wantReason: "resubmit"},
		{name: "unknown head resubmitted after the grace period", head: "state = 'UNKNOWN', unknown_count = 0, submitted_at = now() - interval '1 hour', status_updated_at = now() - interval '1 hour'", wantReason: "resubmit"},
		// The grace runs from the POST: a poll that just answered UNKNOWN does not restart it.
		{name: "unknown grace runs from the post, not the last answer", head: "state = 'UNKNOWN', unknown_count = 1, submitted_at = now() - interval '1 hour', status_updated_at = now()", wantReason: "resubmit"},
		{name: "unknown head posted recently waits however old its last answer", head: "state = 'UNKNOWN', unknown_count = 1, submitted_at = now(), status_updated_at = now() - interval '1 hour'", wantAwait: true},
		// Adopted from a previous owner long after its POST: the grace starts at the adoption,
		// so the ledger is asked before the batch goes again.
		{name: "unknown head adopted just now waits however old its post", head: "state = 'UNKNOWN', unknown_count = 0, submitted_at = now() - interval '1 hour', unknown_since = now()", wantAwait: true},
		{name: "orphaned in-flight head is adopted, not resent", head: "state = 'INFLIGHT', claim_epoch = 99", wantAdopt: true},
		{name: "committed head lets the next batch go", head: "state = 'COMMITTED'", wantReason: "first"},
		{name: "invalid head lets the next batch go", head: "state = 'INVALID'", wantReason: "first"},
		{name: "halted service sends nothing", halt: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			pool := dbtest.NewPool(t)
			first, _ := ingest.Enqueue(ctx, pool, "svc", "b1", []byte("1"))
			second, _ := ingest.Enqueue(ctx, pool, "svc", "b2", []byte("2"))
			if tt.head != "" {
				exec(t, pool, "UPDATE batchclaim.batches SET "+tt.head+" WHERE seq = $1", first.Seq)
			}
			if tt.halt {
				exec(t, pool, "INSERT INTO batchclaim.service_halts (service_id, seq, reason) VALUES ('svc', $1, 'test')", first.Seq)
			}
			eng := engine(t, pool)
			d, a := &dispatcher{free: 10}, newRecorder(t, pool, eng)
			var awaited []string
			q, err := queuer.New(dbtest.Open(t, pool, ""), eng, d, a, queuer.Config{Interval: time.Second, UnknownAnswers: 3, UnknownGrace: time.Minute,
				Awaiting: func(id string) { awaited = append(awaited, id) }})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := q.Fetch(ctx); err != nil {
				t.Fatal(err)
			}
			switch {
			case tt.wantReason == "" && len(d.got) != 0:
				t.Fatalf("handed out %+v, want nothing", d.got[0].Batch)
			case tt.wantReason != "":
				if len(d.got) != 1 {
					t.Fatalf("handed out %d batches, want 1", len(d.got))
				}
				want := first.Seq
				if tt.head == "state = 'COMMITTED'" || tt.head == "state = 'INVALID'" {
					want = second.Seq
				}
				if w := d.got[0]; w.Reason != tt.wantReason || w.Batch.Seq != want {
					t.Fatalf("handed out seq %d for %q, want seq %d for %q", w.Batch.Seq, w.Reason, want, tt.wantReason)
				}
			}
			if got := len(a.adopted) == 1 && a.adopted[0] == first.Seq; got != tt.wantAdopt {
				t.Fatalf("adopted %v, want adoption of the head: %v", a.adopted, tt.wantAdopt)
			}
			if got := len(awaited) == 1 && awaited[0] == "svc"; got != tt.wantAwait || len(awaited) > 1 {
				t.Fatalf("told the poller of %q, want svc: %v", awaited, tt.wantAwait)
			}
		})
	}
}

// An adoption that fails is tried again at the next fetch: the orphaned head's service_id
// goes back to the queue rather than waiting for the safety sweep to come back to it.
func TestFailedAdoptionIsTriedAgain(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.NewPool(t)
	head, err := ingest.Enqueue(ctx, pool, "svc", "b1", []byte("1"))
	if err != nil {
		t.Fatal(err)
	}
	exec(t, pool, "UPDATE batchclaim.batches SET state = 'INFLIGHT', claim_epoch = 99 WHERE seq = $1", head.Seq)
	eng := engine(t, pool)
	d, a := &dispatcher{free: 10}, newRecorder(t, pool, eng)
	a.adoptErr = errors.New("connection reset")
	q, err := queuer.New(dbtest.Open(t, pool, ""), eng, d, a, queuer.Config{Interval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Fetch(ctx); err != nil {
		t.Fatal(err)
	}
	if len(a.adopted) != 0 {
		t.Fatalf("adopted %v while adoptions fail", a.adopted)
	}
	a.adoptErr = nil
	if _, err := q.Fetch(ctx); err != nil {
		t.Fatal(err)
	}
	if len(a.adopted) != 1 || a.adopted[0] != head.Seq {
		t.Fatalf("adopted %v at the fetch after the failure, want seq %d", a.adopted, head.Seq)
	}
}

// Fetch is bounded by the idle workers, hands out one batch per service_id (its head), and
// goes round-robin: with 2 workers and 6 service_ids, three fetches serve all six.
func TestFetchIsBoundedOneAtATimeAndRoundRobin(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.NewPool(t)
	for b := range 2 {
		for s := range 6 {
			if _, err := ingest.Enqueue(ctx, pool, fmt.Sprintf("svc-%d", s), fmt.Sprintf("b%d", b), []byte("x")); err != nil {
				t.Fatal(err)
			}
		}
	}
	d := &dispatcher{free: 2}
	eng := engine(t, pool)
	q, err := queuer.New(dbtest.Open(t, pool, ""), eng, d, newRecorder(t, pool, eng), queuer.Config{Interval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for range 3 {
		if _, err := q.Fetch(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := q.Fetch(ctx); err != nil { // no idle worker: nothing more
			t.Fatal(err)
		}
		if len(d.got) != 2 || d.got[0].Claim.ServiceID == d.got[1].Claim.ServiceID {
			t.Fatalf("handed out %d (want 2, of two service_ids) with 2 idle workers", len(d.got))
		}
		for _, w := range d.got {
			if w.Batch.BatchID != "b0" {
				t.Fatalf("%s: handed out %s before its head b0", w.Claim.ServiceID, w.Batch.BatchID)
			}
			seen[w.Claim.ServiceID] = true
			q.Done(w) // the worker finished (its head stays NEW in this test)
		}
		d.got = nil
	}
	if len(seen) != 6 {
		var ids []string
		for id := range seen {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		t.Fatalf("three fetches served %v, want all six service_ids", ids)
	}
}

func engine(t *testing.T, pool *pgxpool.Pool) *claims.Engine {
	t.Helper()
	eng, err := claims.New(dbtest.Open(t, pool, ""), claims.Config{Name: "q"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if err := eng.Register(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := eng.Cycle(ctx); err != nil {
		t.Fatal(err)
	}
	return eng
}

func exec(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) {
	t.Helper()
	if _, err := pool.Exec(t.Context(), sql, args...); err != nil {
		t.Fatal(err)
	}
}

// An instance with more claims than one fetch reads, and work only on service_ids past the
// first fetch's: told about them (as a wake-up does), the next fetch hands them all out, ahead
// of the start-up pass over every claim; told nothing, a queuer that has just started reaches
// them by going through every held claim, a fetch at a time.
func TestWorkBeyondTheFirstFetchIsFound(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.NewPool(t)
	const keys = 2500
	ids := make([]string, keys)
	for i := range ids {
		ids[i] = fmt.Sprintf("svc-%05d", i)
	}
	if err := claims.RegisterServiceIDs(ctx, pool, ids...); err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, id := range ids[keys-5:] { // the five that sort last
		if _, err := ingest.Enqueue(ctx, pool, id, "b0", []byte("x")); err != nil {
			t.Fatal(err)
		}
		want = append(want, id)
	}
	eng := engine(t, pool)
	if n := len(eng.Held()); n != keys {
		t.Fatalf("holds %d claims, want %d", n, keys)
	}

	t.Run("told", func(t *testing.T) {
		d := &dispatcher{free: 10}
		q, err := queuer.New(dbtest.Open(t, pool, ""), eng, d, newRecorder(t, pool, eng), queuer.Config{Interval: time.Hour, FetchLimit: 100})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := q.Fetch(ctx); err != nil { // the start of the start-up pass: no work
			t.Fatal(err)
		}
		q.Dirty(want...)
		if _, err := q.Fetch(ctx); err != nil { // what it was told about comes first
			t.Fatal(err)
		}
		if got := d.handedOut(); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("handed out %v, want %v", got, want)
		}
		// Hand them back unmarked, so the next subtest finds them NEW again.
		if _, err := pool.Exec(ctx, `UPDATE batchclaim.batches SET state = 'NEW', attempts = 0`); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("not told", func(t *testing.T) {
		d := &dispatcher{free: 10}
		q, err := queuer.New(dbtest.Open(t, pool, ""), eng, d, newRecorder(t, pool, eng), queuer.Config{Interval: time.Hour, FetchLimit: 100})
		if err != nil {
			t.Fatal(err)
		}
		runCtx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- q.Run(runCtx) }()
		deadline := time.Now().Add(30 * time.Second)
		for len(d.handedOut()) < len(want) && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		cancel()
		<-done
		if got := d.handedOut(); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("handed out %v, want %v", got, want)
		}
	})
}

// A fetch hands out jobs while their payloads fit the memory the dispatcher has left, and a
// batch larger than all of it only when nothing else holds any.
func TestFetchKeepsPayloadsWithinMemory(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.NewPool(t)
	for s := range 3 {
		if _, err := ingest.Enqueue(ctx, pool, fmt.Sprintf("svc-%d", s), "b0", make([]byte, 10)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ingest.Enqueue(ctx, pool, "svc-big", "b0", make([]byte, 100)); err != nil {
		t.Fatal(err)
	}
	eng := engine(t, pool)
	d := &dispatcher{free: 10, mem: 25}
	q, err := queuer.New(dbtest.Open(t, pool, ""), eng, d, newRecorder(t, pool, eng), queuer.Config{Interval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Fetch(ctx); err != nil {
		t.Fatal(err)
	}
	if got := d.handedOut(); fmt.Sprint(got) != "[svc-0 svc-1]" {
		t.Fatalf("with 25 bytes free: handed out %v, want the first two 10-byte batches", got)
	}
	var later [][]string
	for range 2 { // the jobs handed out end before each fetch
		d.mu.Lock()
		d.got = nil
		d.mu.Unlock()
		if _, err := q.Fetch(ctx); err != nil {
			t.Fatal(err)
		}
		later = append(later, d.handedOut())
	}
	if fmt.Sprint(later) != "[[svc-2] [svc-big]]" {
		t.Fatalf("next fetches handed out %v, want svc-2 (the 100-byte batch waits for it), then svc-big alone", later)
	}
}

// A queuer needs a DB made by pgdb.Open, and an Interval.
func TestNewRefusesTheZeroDBAndNoInterval(t *testing.T) {
	t.Parallel()
	if _, err := queuer.New(pgdb.DB{}, nil, nil, nil, queuer.Config{Interval: time.Second}); err == nil || !strings.Contains(err.Error(), "pgdb.Open") {
		t.Errorf("New(zero DB) = %v, want an error saying to use pgdb.Open", err)
	}
	db := dbtest.Open(t, &pgxpool.Pool{}, "") // never used: New does no I/O
	if _, err := queuer.New(db, nil, nil, nil, queuer.Config{}); err == nil || !strings.Contains(err.Error(), "Interval must be positive") {
		t.Errorf("New without an Interval = %v, want it refused", err)
	}
}
