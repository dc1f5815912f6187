package observer_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/batchclaim/batchclaim/claims"
	"github.com/batchclaim/batchclaim/ingest"
	"github.com/batchclaim/batchclaim/observer"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
)

// Take reads the heads of the claims it is given, in their order, and marks the NEW ones that
// are due in the same statement: first to last, within its budget of jobs and bytes, each
// fenced on its own claim. The other heads come back unmarked for the queuer to decide on.
func TestTakeMarksNewHeadsWithinItsBudget(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.NewPool(t)
	seq := map[string]int64{}
	for i := range 8 {
		svc := fmt.Sprintf("svc-%d", i)
		s, err := ingest.Enqueue(ctx, pool, svc, "b1", []byte(strings.Repeat("x", 10)))
		if err != nil {
			t.Fatal(err)
		}
		seq[svc] = s.Seq
	}
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := pool.Exec(ctx, sql, args...); err != nil {
			t.Fatal(err)
		}
	}
	// svc-2's head waits for a retry that is due, svc-3's for a run-at time an hour ahead.
	exec(`UPDATE batchclaim.batches SET state = 'DELAYED', next_attempt_at = now() - interval '1 second' WHERE seq = $1`, seq["svc-2"])
	exec(`UPDATE batchclaim.batches SET next_attempt_at = now() + interval '1 hour' WHERE seq = $1`, seq["svc-3"])
	eng, err := claims.New(dbtest.Open(t, pool, ""), claims.Config{Name: "take"})
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Register(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := eng.Cycle(ctx); err != nil {
		t.Fatal(err)
	}
	held := eng.Held()
	if len(held) != 8 {
		t.Fatalf("holds %d claims, want 8", len(held))
	}
	// Taken in reverse order; svc-6's claim is taken over behind the engine's back.
	slices.Reverse(held)
	exec(`UPDATE batchclaim.service_id_claims SET epoch = nextval('batchclaim.service_id_claim_epochs') WHERE service_id = 'svc-6'`)
	rec := mustRecorder(t, pool, eng, observer.RecorderConfig{})

	// Three jobs at most: svc-7, then svc-6 (counted, though its claim turns out stale), then
	// svc-5; svc-4, svc-1 and svc-0 are ready but past the budget.
	heads, jobs, err := rec.Take(ctx, observer.Take{Claims: held, MaxJobs: 3, MaxBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	var order, took []string
	for _, h := range heads {
		order = append(order, fmt.Sprintf("%s:%s/wanted=%t,marked=%t", h.ServiceID, h.State, h.Wanted, h.Marked))
	}
	for _, j := range jobs {
		took = append(took, j.Claim.ServiceID)
		if j.Batch.Seq != seq[j.Claim.ServiceID] || string(j.Batch.Payload) != strings.Repeat("x", 10) || j.Batch.Attempts != 0 ||
			j.FromState != "NEW" || j.Reason != "first" || j.Claim.Epoch == 0 {
			t.Errorf("job %+v", j)
		}
	}
	want := []string{"svc-7:NEW/wanted=true,marked=true", "svc-6:NEW/wanted=true,marked=false", "svc-5:NEW/wanted=true,marked=true",
		"svc-4:NEW/wanted=false,marked=false", "svc-3:NEW/wanted=false,marked=false", "svc-2:DELAYED/wanted=false,marked=false",
		"svc-1:NEW/wanted=false,marked=false", "svc-0:NEW/wanted=false,marked=false"}
	if !slices.Equal(order, want) {
		t.Fatalf("heads\n%v\nwant\n%v", order, want)
	}
	if !slices.Equal(took, []string{"svc-7", "svc-5"}) {
		t.Fatalf("marked %v, want svc-7 and svc-5", took)
	}
	for svc, st := range map[string]string{"svc-7": "INFLIGHT", "svc-6": "NEW", "svc-5": "INFLIGHT", "svc-4": "NEW"} {
		if got := state(t, pool, seq[svc]); got != st {
			t.Errorf("%s: %s, want %s", svc, got, st)
		}
	}
	if _, ok := eng.Holds("svc-6"); ok {
		t.Fatal("the stale claim was not dropped")
	}
	for _, h := range heads {
		if h.ServiceID == "svc-3" && (h.Due || h.DueIn < 3500*time.Second) || h.ServiceID == "svc-2" && !h.Due {
			t.Errorf("%s: due %t in %s", h.ServiceID, h.Due, h.DueIn)
		}
	}

	// Bytes: 25 take two heads of 10 (svc-4, svc-1); none fits in 5 unless the workers hold
	// nothing, when the first goes whatever its size.
	held = eng.Held()
	slices.Reverse(held)
	for _, tc := range []struct {
		max  int64
		any  bool
		want []string
	}{{5, false, nil}, {25, false, []string{"svc-4", "svc-1"}}, {5, true, []string{"svc-0"}}, {5, true, nil}} {
		_, jobs, err := rec.Take(ctx, observer.Take{Claims: held, MaxJobs: 10, MaxBytes: tc.max, AnySize: tc.any})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, j := range jobs {
			got = append(got, j.Claim.ServiceID)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%d bytes (any size %t): marked %v, want %v", tc.max, tc.any, got, tc.want)
		}
	}

	// A lease past its first phase marks nothing, and the claims it was asked about are dropped.
	if _, err := ingest.Enqueue(ctx, pool, "svc-7", "b2", []byte("y")); err != nil {
		t.Fatal(err)
	}
	exec(`UPDATE batchclaim.instances SET expiry_1 = now() - interval '1 second' WHERE id = $1`, eng.InstanceID())
	c7, ok := eng.Holds("svc-7")
	if !ok {
		t.Fatal("svc-7 not held")
	}
	exec(`UPDATE batchclaim.batches SET state = 'COMMITTED' WHERE seq = $1`, seq["svc-7"])
	heads, jobs, err = rec.Take(ctx, observer.Take{Claims: []claims.Claim{c7}, MaxJobs: 10, MaxBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 0 || len(heads) != 1 || !heads[0].Wanted || heads[0].Fenced || heads[0].BatchID != "b2" {
		t.Fatalf("past phase one: heads %+v, jobs %v", heads, jobs)
	}
	if _, ok := eng.Holds("svc-7"); ok {
		t.Fatal("a claim whose lease is past phase one was not dropped")
	}
}
