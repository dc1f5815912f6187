package observer_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/ingest"
	"github.com/batchclaim/batchclaim/observer"
)

// A batch recorded INVALID, by its POST's answer or by a poll, is logged at WARN with its
// reason, and with HaltOnInvalid as the halt of its service_id.
func TestInvalidBatchesLoggedAtWarn(t *testing.T) {
	t.Parallel()
	for _, halt := range []bool{false, true} {
		t.Run(map[bool]string{false: "skip", true: "halt"}[halt], func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			pool, eng, _, c, b := recorderSetup(t)
			var buf bytes.Buffer
			rec := mustRecorder(t, pool, eng, observer.RecorderConfig{HaltOnInvalid: halt,
				Logger: slog.New(slog.NewJSONHandler(&buf, nil))})
			marked, err := rec.Mark(ctx, []batchclaim.Job{{Claim: c, Batch: b, FromState: batchclaim.StateNew, Reason: "first"}})
			if err != nil || len(marked) != 1 {
				t.Fatalf("mark: %v, %d marked", err, len(marked))
			}
			if _, _, err := rec.Finish(ctx, batchclaim.Outcome{Job: marked[0], Latency: time.Millisecond,
				Result: batchclaim.Result{Verdict: batchclaim.Rejected, HTTPStatus: 422, Detail: "422: bad signature", Invalid: []byte(`[{"id":"t1"}]`)}}); err != nil {
				t.Fatal(err)
			}
			// A second batch, accepted, then found INVALID by a poll.
			s2, err := ingest.Enqueue(ctx, pool, "svc", "b2", []byte("y"))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := pool.Exec(ctx, `UPDATE batchclaim.batches SET state = 'PENDING', attempts = 1 WHERE seq = $1`, s2.Seq); err != nil {
				t.Fatal(err)
			}
			if err := rec.RecordStatuses(ctx, []observer.StatusUpdate{{Claim: c, Seq: s2.Seq, BatchID: "b2", Attempt: 1,
				From: batchclaim.StatePending, Status: batchclaim.StatusInvalid}}); err != nil {
				t.Fatal(err)
			}
			var lines []map[string]any
			for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
				var m map[string]any
				if err := json.Unmarshal([]byte(l), &m); err != nil {
					t.Fatalf("log line %q: %v", l, err)
				}
				lines = append(lines, m)
			}
			if len(lines) != 2 {
				t.Fatalf("%d log lines, want 2:\n%s", len(lines), buf.String())
			}
			wantMsg := "batch INVALID: skipped, its service_id goes on with the next batch"
			if halt {
				wantMsg = "service_id halted: batch INVALID; resume it once the cause is fixed"
			}
			for i, want := range []struct {
				seq     int64
				batchID string
				reason  string
			}{{b.Seq, "b1", "422: bad signature"}, {s2.Seq, "b2", "ledger: INVALID"}} {
				l := lines[i]
				if l["level"] != "WARN" || l["msg"] != wantMsg || l["service_id"] != "svc" || l["seq"] != float64(want.seq) ||
					l["batch_id"] != want.batchID || l["reason"] != want.reason {
					t.Errorf("line %d: %v; want WARN %q about %s (seq %d), reason %q", i, l, wantMsg, want.batchID, want.seq, want.reason)
				}
			}
			if lines[0]["invalid_details"] != `[{"id":"t1"}]` {
				t.Errorf("first line's invalid_details: %v", lines[0]["invalid_details"])
			}
		})
	}
}
