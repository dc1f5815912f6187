package submitter

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/batchclaim/batchclaim"
)

// A job's log line carries the job's attributes before the line's own; a line below the
// logger's level writes nothing.
func TestJobLoggerWritesTheJobsAttributes(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	j := Job{Claim: batchclaim.Claim{ServiceID: "svc-1", Epoch: 7},
		Batch: batchclaim.Batch{Seq: 42, ServiceID: "svc-1", BatchID: "0123456789abcdef"}}
	l := jobLogger{log, j}
	l.Debug("not written", "k", "v")
	if buf.Len() != 0 {
		t.Fatalf("a debug line at level info wrote %q", buf.String())
	}
	l.Warn("could not record submission outcome", "error", "boom")
	got := buf.String()
	for _, want := range []string{"level=WARN", `msg="could not record submission outcome"`,
		"service_id=svc-1 batch_id=0123456789ab epoch=7 seq=42 error=boom"} {
		if !strings.Contains(got, want) {
			t.Errorf("line %q lacks %q", got, want)
		}
	}
}
