package claims

import (
	"context"
	"testing"
	"time"

	"github.com/batchclaim/batchclaim/testkit/dbtest"
	"github.com/batchclaim/batchclaim/testkit/testutil"
)

// The local deadline's watchdog fences the engine only while no renewal has started the
// deadline's next life: a renewal confirmed between the deadline passing and the fence taking
// the engine's lock keeps the claims (one gained after that renewal included), and one that
// arrives after the fence revives the engine without bringing back the claims it dropped.
func TestFenceSparesClaimsOfALaterRenewal(t *testing.T) {
	t.Parallel()
	e, err := New(dbtest.Unreachable(t), Config{})
	if err != nil {
		t.Fatal(err)
	}
	window := e.cfg.LocalDeadline
	hold := func(id string) context.Context {
		ctx, cancel := context.WithCancel(t.Context())
		e.mu.Lock()
		e.held[id] = &heldClaim{claim: Claim{ServiceID: id, Epoch: 1}, cancel: cancel}
		e.mu.Unlock()
		return ctx
	}
	e.mu.Lock()
	e.registered = true
	e.mu.Unlock()
	e.deadline.Start(time.Now())
	a := hold("a")

	// The watchdog's fence runs late, after a renewal started the next life: nothing dropped.
	e.fence()
	if !e.Healthy() || len(e.Held()) != 1 || a.Err() != nil {
		t.Fatalf("a fence racing a confirmed renewal dropped the claims: healthy %v, held %d", e.Healthy(), len(e.Held()))
	}
	if n := e.Stats().DeadlineFences; n != 0 {
		t.Fatalf("%d deadline fences counted, want 0", n)
	}

	// A renewal sent a whole window ago is of no use: the deadline passes and the fence drops.
	e.deadline.Confirm(time.Now().Add(-window))
	testutil.WaitFor(t, 5*time.Second, "the fence at the deadline", func() bool { return a.Err() != nil })
	if e.Healthy() || len(e.Held()) != 0 || e.Stats().DeadlineFences != 1 {
		t.Fatalf("after the deadline: healthy %v, held %d, fences %d; want false, 0, 1", e.Healthy(), len(e.Held()), e.Stats().DeadlineFences)
	}

	// A late renewal that arrived after its own deadline does not revive; a timely one does.
	e.renewed(time.Now().Add(-window))
	if e.Healthy() {
		t.Fatal("a renewal past its own deadline revived the engine")
	}
	e.renewed(time.Now())
	if !e.Healthy() || len(e.Held()) != 0 {
		t.Fatalf("after a timely renewal: healthy %v, held %d; want true and 0 (claims are read again by the next cycle)", e.Healthy(), len(e.Held()))
	}
	if !e.Deadline().After(time.Now()) {
		t.Fatal("the deadline did not move with the renewal")
	}
	e.deadline.Stop()
}
