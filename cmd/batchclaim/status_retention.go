package main

import (
	"fmt"
	"io"
	"time"

	"github.com/batchclaim/batchclaim/inspect"
)

// printRetention prints the retention part of `status`: the job's last run (see
// docs/operations.md, Retention).
func printRetention(w io.Writer, r inspect.RetentionStatus) {
	if !r.Ran {
		fmt.Fprintln(w, "retention: no run recorded (off on every instance, or not run yet)")
		return
	}
	age := time.Duration(r.MaxAgeSeconds * float64(time.Second))
	fmt.Fprintf(w, "retention: finished batches deleted after %s; last run %.1fs ago by %s deleted %d; %d deleted in all\n",
		age, r.LastRunAgeSeconds, printable(r.LastRunInstance), r.LastRunPruned, r.PrunedTotal)
}
