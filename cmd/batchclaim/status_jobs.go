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
	"github.com/batchclaim/batchclaim/inspect"
	"github.com/batchclaim/batchclaim/pgdb"
)

func printKinds(w io.Writer, kinds []inspect.KindStatus) {
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
func byStateText(m inspect.StateCounts) string {
	var parts []string
	for _, st := range batchclaim.States {
		if n := m[string(st)]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", st, n))
		}
	}
	return strings.Join(parts, ", ")
}

// printJob prints `status --job SEQ`.
func printJob(w io.Writer, j inspect.JobStatus) {
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
func runStatusJob(ctx context.Context, q pgdb.Querier, seq int64, asJSON bool, stdout io.Writer) error {
	if seq < 1 {
		return errors.New("--job: give a job's seq (a positive integer)")
	}
	j, err := inspect.Job(ctx, q, seq)
	if err != nil {
		return err
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(j)
	}
	printJob(stdout, j)
	return nil
}
