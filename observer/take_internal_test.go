package observer

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/claims"
	"github.com/batchclaim/batchclaim/ingest"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
)

// Take marks a NEW head in flight in the statement that reads it; Mark marks a head the queuer
// decided on. The two must leave the same batch row (the attempt the outcome then writes comes
// from it) and return the same job: a change to one statement's mark is made to the other.
func TestTakeMarksWhatMarkMarks(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.NewPool(t)
	twins := []string{"mark", "take"}
	opts := map[string][]ingest.EnqueueOption{
		"plain": nil,
		"typed": {ingest.Kind("email"), ingest.MaxAttempts(7), ingest.Timeout(1500 * time.Millisecond)},
	}
	for _, twin := range twins {
		for name, o := range opts {
			if _, err := ingest.Enqueue(ctx, pool, twin+"-"+name, "b1", []byte("payload of "+name), o...); err != nil {
				t.Fatal(err)
			}
		}
	}
	eng := claimAll(t, pool)
	rec, err := NewRecorder(dbtest.Open(t, pool, ""), eng, RecorderConfig{})
	if err != nil {
		t.Fatal(err)
	}
	held := map[string][]claims.Claim{}
	for _, c := range eng.Held() {
		twin, _, _ := strings.Cut(c.ServiceID, "-")
		held[twin] = append(held[twin], c)
	}
	// Mark's jobs as the queuer makes them from the heads it read.
	heads, _, err := rec.Take(ctx, Take{Claims: held["mark"], MaxJobs: 0, MaxBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	var jobs []batchclaim.Job
	for _, h := range heads {
		c, _ := eng.Holds(h.ServiceID)
		jobs = append(jobs, batchclaim.Job{Claim: c, FromState: batchclaim.StateNew, Reason: batchclaim.ReasonFirst,
			Batch: batchclaim.Batch{Seq: h.Seq, ServiceID: h.ServiceID, BatchID: h.BatchID}})
	}
	marked, err := rec.Mark(ctx, jobs)
	if err != nil || len(marked) != len(opts) {
		t.Fatalf("Mark marked %d of %d: %v", len(marked), len(opts), err)
	}
	_, taken, err := rec.Take(ctx, Take{Claims: held["take"], MaxJobs: 10, MaxBytes: 1 << 20})
	if err != nil || len(taken) != len(opts) {
		t.Fatalf("Take marked %d of %d: %v", len(taken), len(opts), err)
	}
	job := func(j batchclaim.Job) string {
		j.Claim, j.Batch.Seq = claims.Claim{}, 0
		j.Batch.ServiceID = strings.TrimPrefix(strings.TrimPrefix(j.Batch.ServiceID, "mark-"), "take-")
		return fmt.Sprintf("%+v", j)
	}
	for _, m := range marked {
		i := slices.IndexFunc(taken, func(j batchclaim.Job) bool {
			return strings.HasSuffix(j.Claim.ServiceID, strings.TrimPrefix(m.Claim.ServiceID, "mark"))
		})
		if i < 0 {
			t.Fatalf("Take did not mark the twin of %s", m.Claim.ServiceID)
		}
		if a, b := job(m), job(taken[i]); a != b {
			t.Errorf("jobs differ:\n Mark: %s\n Take: %s", a, b)
		}
		if strings.HasSuffix(m.Claim.ServiceID, "typed") && (m.Batch.Kind != "email" || m.Batch.MaxAttempts != 7 || m.Batch.Timeout != 1500*time.Millisecond) {
			t.Errorf("typed job: %+v", m.Batch)
		}
	}
	// Every column of every batch row, times as offsets from the mark's time.
	state := func(twin string) map[string]string {
		rows, err := pool.Query(ctx, `
			SELECT substr(service_id, length($1) + 2),
			       (to_jsonb(b) - 'seq' - 'pos' - 'service_id' - 'created_at' - 'updated_at' - 'submitted_at' - 'attempt_xid'
			        - 'claim_epoch' - 'claimant' - 'status_updated_at')::text,
			       updated_at = submitted_at, claim_epoch = c.epoch, b.claimant = c.claimant, attempt_xid IS NOT NULL
			FROM batchclaim.batches b JOIN batchclaim.service_id_claims c USING (service_id)
			WHERE service_id LIKE $1 || '-%'`, twin)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		out := map[string]string{}
		for rows.Next() {
			var name, cols string
			var rest [4]any
			if err := rows.Scan(append([]any{&name, &cols}, sliceOfPointers(rest[:])...)...); err != nil {
				t.Fatal(err)
			}
			out[name] = fmt.Sprint(cols, rest)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	ms, ts := state("mark"), state("take")
	if len(ms) != len(opts) || len(ts) != len(opts) {
		t.Fatalf("batch rows: %d and %d", len(ms), len(ts))
	}
	for name, want := range ms {
		if !strings.Contains(want, `"state": "INFLIGHT"`) || !strings.HasSuffix(want, "[true true true true]") {
			t.Errorf("batch %s after Mark: %s", name, want)
		}
		if ts[name] != want {
			t.Errorf("batch %s:\n Mark: %s\n Take: %s", name, want, ts[name])
		}
	}
}
