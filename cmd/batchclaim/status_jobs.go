package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/internal/db"
	"github.com/batchclaim/batchclaim/pgdb"
)

// kindStatus is one kind of typed jobs (package jobs) in `status`: its jobs by state.
type kindStatus struct {
	Kind    string           `json:"kind"`
	ByState map[string]int64 `json:"by_state"`
}

func readKinds(ctx context.Context, q db.DBTX) ([]kindStatus, error) {
	rows, err := db.New().BatchKindCounts(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("count jobs by kind: %w", err)
	}
	out := []kindStatus{}
	for _, r := range rows {
		if len(out) == 0 || out[len(out)-1].Kind != r.Kind {
			out = append(out, kindStatus{Kind: r.Kind, ByState: map[string]int64{}})
		}
		out[len(out)-1].ByState[r.State] = r.Batches
	}
	return out, nil
}

func printKinds(w io.Writer, kinds []kindStatus) {
	if len(kinds) == 0 {
		return
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KIND\tJOBS BY STATE")
	for _, k := range kinds {
		fmt.Fprintf(tw, "%s\t%s\n", printable(k.Kind), byStateText(k.ByState))
	}
	tw.Flush()
}

// byStateText is "NEW 2, COMMITTED 5", in pipeline order.
func byStateText(m map[string]int64) string {
	var parts []string
	for _, st := range batchclaim.States {
		if n := m[string(st)]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", st, n))
		}
	}
	return strings.Join(parts, ", ")
}

// jobStatus is one job in `status --job SEQ`.
type jobStatus struct {
	Seq           int64           `json:"seq"`
	ServiceID     string          `json:"service_id"`
	BatchID       string          `json:"batch_id"`
	Kind          string          `json:"kind,omitempty"`
	State         string          `json:"state"`
	Attempts      int32           `json:"attempts"`
	TimeoutMs     *int64          `json:"timeout_ms,omitempty"`
	CreatedAt     time.Time       `json:"created_at"`
	UpdatedAt     time.Time       `json:"updated_at"`
	NextAttemptAt *time.Time      `json:"next_attempt_at,omitempty"`
	FinishedAt    *time.Time      `json:"finished_at,omitempty"`
	LastError     string          `json:"last_error,omitempty"`
	PayloadBytes  int64           `json:"payload_bytes"`
	Output        json.RawMessage `json:"output,omitempty"`
}

func readJob(ctx context.Context, q db.DBTX, seq int64) (jobStatus, error) {
	r, err := db.New().UIBatch(ctx, q, seq)
	if pgdb.NoRows(err) {
		return jobStatus{}, fmt.Errorf("job %d: %w", seq, batchclaim.ErrNotFound)
	}
	if err != nil {
		return jobStatus{}, fmt.Errorf("read job %d: %w", seq, err)
	}
	j := jobStatus{Seq: r.Seq, ServiceID: r.ServiceID, BatchID: r.BatchID, State: r.State, Attempts: r.Attempts,
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

func (j jobStatus) print(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(k, v string) {
		if v != "" {
			fmt.Fprintf(tw, "%s\t%s\n", k, v)
		}
	}
	row("job", fmt.Sprint(j.Seq))
	row("service_id", printable(j.ServiceID))
	row("id", printable(j.BatchID))
	row("kind", printable(j.Kind))
	row("state", j.State)
	row("attempts", fmt.Sprint(j.Attempts))
	if j.TimeoutMs != nil {
		row("timeout", (time.Duration(*j.TimeoutMs) * time.Millisecond).String())
	}
	row("created", j.CreatedAt.Format(time.RFC3339))
	if j.NextAttemptAt != nil {
		row("next attempt", j.NextAttemptAt.Format(time.RFC3339))
	}
	if j.FinishedAt != nil {
		row("finished", j.FinishedAt.Format(time.RFC3339))
	}
	row("last error", printable(j.LastError))
	row("payload", fmt.Sprintf("%d bytes", j.PayloadBytes))
	if j.Output != nil {
		row("output", printable(string(j.Output)))
	}
	tw.Flush()
}

// runStatusJob is `status --job SEQ`.
func runStatusJob(ctx context.Context, q db.DBTX, seq int64, asJSON bool, stdout io.Writer) error {
	if seq < 1 {
		return errors.New("--job: give a job's seq (a positive integer)")
	}
	j, err := readJob(ctx, q, seq)
	if err != nil {
		return err
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(j)
	}
	j.print(stdout)
	return nil
}
