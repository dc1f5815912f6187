package claims_test

import (
	"errors"
	"testing"
	"time"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/claims"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
)

// TestLocalDeadlineFencesAndRecovers: an instance that does not renew within D fences
// itself (claims reported lost, contexts cancelled, no submissions), and adopts its claims
// again once a renewal succeeds and the database still lists them as its own.
func TestLocalDeadlineFencesAndRecovers(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.NewPool(t)
	registerServiceIDs(t, pool, 3)
	e, ev := newEngine(t, pool, 1, func(c *claims.Config) {
		// T1 = 3 s: after the recovery below the test reads the engine within the new local
		// deadline (2 s), which a pause of a loaded machine must not outlast.
		c.RenewInterval, c.Expiry1, c.Expiry2 = 100*time.Millisecond, 3*time.Second, 10*time.Second
	})
	cycle(t, e)
	held := e.Held()
	if len(held) != 3 {
		t.Fatalf("holds %d claims, want 3", len(held))
	}
	// No further renewal: the watchdog must fire at the local deadline (2/3 of T1, 2 s).
	for range 3 {
		select {
		case r := <-ev.lostCh:
			if r != claims.LossDeadline {
				t.Fatalf("lost a claim for %q, want %q", r, claims.LossDeadline)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the local deadline passed without fencing")
		}
	}
	if e.Healthy() || len(e.Held()) != 0 {
		t.Fatalf("after the deadline: healthy=%v held=%d, want false and 0", e.Healthy(), len(e.Held()))
	}
	if held[0].Context().Err() == nil {
		t.Fatal("claim context not cancelled at the deadline")
	}
	if err := e.BeginSubmission(ctx, pool, held[0]); !errors.Is(err, batchclaim.ErrClaimLost) {
		t.Fatalf("BeginSubmission after the deadline: %v, want ErrClaimLost", err)
	}
	// A renewal succeeds again; nobody took the claims, so the same epochs come back.
	rep := cycle(t, e)
	if len(rep.Gained) != 3 || !e.Healthy() {
		t.Fatalf("after recovery gained %v healthy=%v", rep.Gained, e.Healthy())
	}
	before := map[string]int64{}
	for _, c := range held {
		before[c.ServiceID] = c.Epoch
	}
	for _, c := range e.Held() {
		if c.Epoch != before[c.ServiceID] {
			t.Fatalf("%s re-adopted with epoch %d, want the unchanged %d", c.ServiceID, c.Epoch, before[c.ServiceID])
		}
	}
	if got := e.Stats().DeadlineFences; got != 1 {
		t.Fatalf("DeadlineFences = %d, want 1", got)
	}
}
