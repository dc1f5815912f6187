package heartbeat_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/patterns/election"
	"github.com/batchclaim/batchclaim/patterns/heartbeat"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
	"github.com/batchclaim/batchclaim/testkit/testutil"
)

// hookLog records what a Service's hook received; fail makes the hook refuse everything.
type hookLog struct {
	mu     sync.Mutex
	fail   bool
	events []heartbeat.Event
}

func (h *hookLog) hook(_ context.Context, e heartbeat.Event) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.fail {
		return errors.New("hook refuses")
	}
	h.events = append(h.events, e)
	return nil
}

func (h *hookLog) keys() map[string]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := map[string]int{}
	for _, e := range h.events {
		out[e.Key()]++
	}
	return out
}

// instance is a Service running in this process.
type instance struct {
	svc    *heartbeat.Service
	hooks  *hookLog
	cancel context.CancelFunc
	done   chan error
}

func startInstance(t *testing.T, pool *pgxpool.Pool, name string, hooks *hookLog) *instance {
	t.Helper()
	cfg := childConfig(name, "", nil)
	cfg.OnEvent = hooks.hook
	svc, err := heartbeat.New(dbtest.Open(t, pool, ""), cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	in := &instance{svc: svc, hooks: hooks, cancel: cancel, done: make(chan error, 1)}
	go func() { in.done <- svc.Run(ctx) }()
	t.Cleanup(in.stop)
	return in
}

func (in *instance) stop() {
	in.cancel()
	<-in.done
	in.done <- nil // stop is idempotent
}

// waitPrimary waits until the database says name is the active instance, and returns its
// term.
func waitPrimary(t *testing.T, pool *pgxpool.Pool, name string) election.Term {
	t.Helper()
	var term election.Term
	testutil.WaitFor(t, 20*time.Second, name+" to be the active instance", func() bool {
		tm, err := election.GetPrimary(t.Context(), pool, heartbeat.RoleDefault)
		term = tm
		return err == nil && tm.Name == name
	})
	return term
}

// eventsBy waits until the stored events satisfy cond and returns them.
func (b bundle) waitEvents(t *testing.T, what string, cond func([]heartbeat.Event) bool) []heartbeat.Event {
	t.Helper()
	var es []heartbeat.Event
	testutil.WaitFor(t, 20*time.Second, what, func() bool {
		es = b.events(t)
		return cond(es)
	})
	return es
}

func has(es []heartbeat.Event, key string) *heartbeat.Event {
	for i := range es {
		if es[i].Key() == key {
			return &es[i]
		}
	}
	return nil
}

// checkOnce fails the test if an episode was raised or cleared twice or written by an
// instance that was not active at that database instant.
func (b bundle) checkOnce(t *testing.T) {
	t.Helper()
	seen := map[string]bool{}
	for _, e := range b.events(t) {
		if seen[e.Key()] {
			t.Fatalf("%s stored twice", e.Key())
		}
		seen[e.Key()] = true
	}
	bad, err := heartbeat.AuditWriters(t.Context(), b.pool, heartbeat.RoleDefault)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range bad {
		t.Errorf("event %s written by %s (epoch %d) at %s while it was not the active instance", e.Key(), e.InstanceID, e.TermEpoch, e.WrittenAt)
	}
}

// The standby writes nothing: the active instance raises, and a step forced on the standby
// is refused by the election's fence and stores nothing.
func TestTheStandbyNeverRaises(t *testing.T) {
	t.Parallel()
	b := setup(t, eventType("hb", time.Second, 3))
	a := startInstance(t, b.pool, "a", &hookLog{})
	waitPrimary(t, b.pool, "a")
	s := startInstance(t, b.pool, "s", &hookLog{})
	b.beat(t, "hb", "vnf-1")
	b.age(t, "hb", "vnf-1", 10*time.Second)
	b.waitEvents(t, "the raise", func(es []heartbeat.Event) bool { return has(es, "hb/vnf-1/1/raised") != nil })

	b.beat(t, "hb", "vnf-2")
	b.age(t, "hb", "vnf-2", 10*time.Second)
	for _, epoch := range []int64{1, 2, 99} {
		_, _, err := s.svc.StepAs(t.Context(), election.Term{Role: heartbeat.RoleDefault, Epoch: epoch, Name: "s"})
		if !errors.Is(err, batchclaim.ErrClaimLost) {
			t.Fatalf("a step of the standby as epoch %d: err %v, want ErrClaimLost", epoch, err)
		}
	}
	b.waitEvents(t, "the raise of vnf-2", func(es []heartbeat.Event) bool { return has(es, "hb/vnf-2/1/raised") != nil })
	if st := s.svc.Stats(); st.Terms != 0 || st.Raised != 0 || st.Cleared != 0 || st.Steps != 0 {
		t.Fatalf("standby stats %+v: it acted as the active instance", st)
	}
	// The active instance counts a raise once its step committed: the event can be read a
	// moment before the count moves.
	testutil.WaitFor(t, 10*time.Second, "the active instance to count 2 raises", func() bool { return a.svc.Stats().Raised >= 2 })
	if st := a.svc.Stats(); st.Raised != 2 {
		t.Fatalf("active stats %+v, want 2 raises", st)
	}
	b.checkOnce(t)
}

// The active instance stops; the new one delivers what the old one stored and could not
// deliver, raises what came due, clears what was raised before, and repeats nothing.
func TestHandoverNeitherLosesNorRepeats(t *testing.T) {
	t.Parallel()
	b := setup(t, eventType("hb", time.Second, 3))
	old := startInstance(t, b.pool, "old", &hookLog{fail: true})
	oldTerm := waitPrimary(t, b.pool, "old")
	next := startInstance(t, b.pool, "next", &hookLog{})
	for _, src := range []string{"s1", "s2"} {
		b.beat(t, "hb", src)
	}
	b.age(t, "hb", "s1", 10*time.Second)
	es := b.waitEvents(t, "s1 raised", func(es []heartbeat.Event) bool { return has(es, "hb/s1/1/raised") != nil })
	if e := has(es, "hb/s1/1/raised"); e.TermEpoch != oldTerm.Epoch || e.DeliveredAt != nil {
		t.Fatalf("s1's raise %+v: want it by the old term, undelivered (its hook refuses)", e)
	}

	b.age(t, "hb", "s2", 10*time.Second) // due during the handover
	old.stop()
	nextTerm := waitPrimary(t, b.pool, "next")
	es = b.waitEvents(t, "s2 raised", func(es []heartbeat.Event) bool { return has(es, "hb/s2/1/raised") != nil })
	b.beat(t, "hb", "s1")
	es = b.waitEvents(t, "s1 cleared", func(es []heartbeat.Event) bool { return has(es, "hb/s1/1/cleared") != nil })
	if e := has(es, "hb/s1/1/cleared"); e.TermEpoch != nextTerm.Epoch {
		t.Fatalf("s1's clear by epoch %d, want the new term %d", e.TermEpoch, nextTerm.Epoch)
	}
	testutil.WaitFor(t, 20*time.Second, "every event delivered by the new active instance", func() bool {
		k := next.hooks.keys()
		return k["hb/s1/1/raised"] > 0 && k["hb/s2/1/raised"] > 0 && k["hb/s1/1/cleared"] > 0
	})
	if len(es) != 3 {
		t.Fatalf("stored events %v, want s1 raised and cleared, s2 raised", keysOf(es))
	}
	b.checkOnce(t)
}

func keysOf(es []heartbeat.Event) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = fmt.Sprintf("%s@%d", e.Key(), e.TermEpoch)
	}
	return out
}
