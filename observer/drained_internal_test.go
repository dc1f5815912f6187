package observer

import (
	"testing"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/ingest"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
)

// An outcome that finishes the last unfinished batch of its service_id starts its idle clock
// (TrackIdle) and is reported drained; with SkipValid, a VALID batch before it is still
// unfinished: the clock does not start, and it is never reported drained (the probe for
// the next head passes over VALID batches).
func TestDrainedCountsEveryUnfinishedBatch(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.NewPool(t)
	seqs := map[string]int64{}
	for _, b := range []struct{ svc, id string }{{"alone", "b1"}, {"behind-valid", "b0"}, {"behind-valid", "b1"}} {
		s, err := ingest.Enqueue(ctx, pool, b.svc, b.id, []byte("x"))
		if err != nil {
			t.Fatal(err)
		}
		seqs[b.svc+"/"+b.id] = s.Seq
	}
	if _, err := pool.Exec(ctx, `UPDATE batchclaim.batches SET state = 'VALID' WHERE seq = $1`, seqs["behind-valid/b0"]); err != nil {
		t.Fatal(err)
	}
	eng := claimAll(t, pool)
	for _, c := range []struct {
		svc       string
		skipValid bool
		drained   bool
	}{{"alone", false, true}, {"behind-valid", true, false}} {
		var drained, recorded int
		rec, err := NewRecorder(dbtest.Open(t, pool, ""), eng, RecorderConfig{TrackIdle: true, SkipValid: c.skipValid,
			Recorded: func(string) { recorded++ }, Drained: func(string, int64) { drained++ }})
		if err != nil {
			t.Fatal(err)
		}
		claim, _ := eng.Holds(c.svc)
		marked, err := rec.Mark(ctx, []batchclaim.Job{{Claim: claim, FromState: batchclaim.StateNew, Reason: batchclaim.ReasonFirst,
			Batch: batchclaim.Batch{Seq: seqs[c.svc+"/b1"], ServiceID: c.svc, BatchID: "b1"}}})
		if err != nil || len(marked) != 1 {
			t.Fatalf("%s: marked %d: %v", c.svc, len(marked), err)
		}
		if _, _, err := rec.Finish(ctx, batchclaim.Outcome{Job: marked[0], Result: batchclaim.Result{Verdict: batchclaim.Done}}); err != nil {
			t.Fatal(err)
		}
		var idle bool
		if err := pool.QueryRow(ctx, `SELECT active_at IS NOT NULL FROM batchclaim.service_id_claims WHERE service_id = $1`, c.svc).Scan(&idle); err != nil {
			t.Fatal(err)
		}
		if idle != c.drained || (drained == 1) != c.drained || recorded+drained != 1 {
			t.Errorf("%s (skip valid %t): idle clock started %t, drained %d, recorded %d; want drained %t",
				c.svc, c.skipValid, idle, drained, recorded, c.drained)
		}
	}
}

// An outcome whose write marks its service_id's next batch in flight for its caller (a
// chain) tells the queuer nothing: the service_id's work is in flight again, and the
// chained job's end tells it. Without a chain, the outcome is Recorded (more work behind it)
// or Drained (none).
func TestChainedOutcomeIsNotRecorded(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.NewPool(t)
	var seqs []int64
	for _, id := range []string{"b1", "b2", "b3"} {
		s, err := ingest.Enqueue(ctx, pool, "chain", id, []byte("x"))
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, s.Seq)
	}
	eng := claimAll(t, pool)
	var recorded, drained int
	rec, err := NewRecorder(dbtest.Open(t, pool, ""), eng, RecorderConfig{
		Recorded: func(string) { recorded++ }, Drained: func(string, int64) { drained++ }})
	if err != nil {
		t.Fatal(err)
	}
	claim, _ := eng.Holds("chain")
	marked, err := rec.Mark(ctx, []batchclaim.Job{{Claim: claim, FromState: batchclaim.StateNew, Reason: batchclaim.ReasonFirst,
		Batch: batchclaim.Batch{Seq: seqs[0], ServiceID: "chain", BatchID: "b1"}}})
	if err != nil || len(marked) != 1 {
		t.Fatalf("marked %d: %v", len(marked), err)
	}
	job := marked[0]
	for i, c := range []struct {
		chain             bool
		recorded, drained int
	}{{true, 0, 0}, {false, 1, 0}} {
		next, ok, err := rec.Finish(ctx, batchclaim.Outcome{Job: job, Result: batchclaim.Result{Verdict: batchclaim.Done}, Chain: c.chain, ChainMaxBytes: -1})
		if err != nil || ok != c.chain || (ok && next.Batch.Seq != seqs[i+1]) {
			t.Fatalf("outcome %d (chain %t): next %d, %t, %v", i+1, c.chain, next.Batch.Seq, ok, err)
		}
		if recorded != c.recorded || drained != c.drained {
			t.Errorf("outcome %d (chain %t): recorded %d, drained %d; want %d, %d", i+1, c.chain, recorded, drained, c.recorded, c.drained)
		}
		if ok {
			job = next
		}
	}
}
