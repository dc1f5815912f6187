package inspect

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/internal/db"
	"github.com/batchclaim/batchclaim/pgdb"
)

// JobStatus is one job (a batch) without its payload: what `batchclaim status --job SEQ`
// shows.
type JobStatus struct {
	Seq       int64  `json:"seq"`
	ServiceID string `json:"service_id"`
	BatchID   string `json:"batch_id"`
	// Kind is the job's kind (package jobs); empty for a ledger batch or a plain job.
	Kind     string `json:"kind,omitempty"`
	State    string `json:"state"`
	Attempts int32  `json:"attempts"`
	// TimeoutMs is the job's own timeout, set when it was stored (none: its kind's or the
	// runner's).
	TimeoutMs *int64    `json:"timeout_ms,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	// NextAttemptAt is when an unfinished job is tried again; none once it is finished.
	NextAttemptAt *time.Time `json:"next_attempt_at,omitempty"`
	FinishedAt    *time.Time `json:"finished_at,omitempty"`
	LastError     string     `json:"last_error,omitempty"`
	PayloadBytes  int64      `json:"payload_bytes"`
	// Output is what the job recorded (jobs.RecordOutput, batchclaim.Result.Output), when it
	// is valid JSON.
	Output json.RawMessage `json:"output,omitempty"`
}

// Job reads the job whose seq is seq, or returns an error wrapping batchclaim.ErrNotFound.
func Job(ctx context.Context, q pgdb.Querier, seq int64) (JobStatus, error) {
	r, err := db.New().UIBatch(ctx, q, seq)
	if pgdb.NoRows(err) {
		return JobStatus{}, fmt.Errorf("job %d: %w", seq, batchclaim.ErrNotFound)
	}
	if err != nil {
		return JobStatus{}, fmt.Errorf("read job %d: %w", seq, err)
	}
	j := JobStatus{Seq: r.Seq, ServiceID: r.ServiceID, BatchID: r.BatchID, State: r.State, Attempts: r.Attempts,
		TimeoutMs: r.TimeoutMs, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, FinishedAt: r.FinishedAt, PayloadBytes: r.PayloadBytes}
	if r.Kind != nil {
		j.Kind = *r.Kind
	}
	if r.LastError != nil {
		j.LastError = *r.LastError
	}
	if r.FinishedAt == nil {
		j.NextAttemptAt = r.NextAttemptAt
	}
	if len(r.Output) > 0 && json.Valid(r.Output) {
		j.Output = r.Output
	}
	return j, nil
}
