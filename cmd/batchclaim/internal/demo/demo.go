package demo

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/batchclaim/batchclaim/cmd/batchclaim/internal/cli"
	"github.com/batchclaim/batchclaim/dlt"
)

// demoConfig shapes `batchclaim demo`.
type demoConfig struct {
	instances, serviceIDs, batches int
	flavor                         dlt.Flavor
	asJSON, keep                   bool
	timeout                        time.Duration
}

// Command is `batchclaim demo`: instances of this binary, a ledger simulator and faults on a
// throwaway database, ended by a summary checked against the ledger's own record.
func Command(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("demo", "[flags]",
		"The whole story on a throwaway database: picks a database (DATABASE_URL if set, else a\n"+
			"throwaway cluster from local PostgreSQL binaries, else a Docker container), runs the ledger\n"+
			"simulator in-process, starts instances of this binary as separate processes, stores\n"+
			"service-ids x batches batches, SIGKILLs one instance midway, SIGSTOPs another past\n"+
			"expiry-2 and resumes it, restarts the ledger (it forgets pending batches), shows a live\n"+
			"table each second and ends with a summary checked against the ledger's own record.\n"+
			"Exits non-zero if a batch was lost, committed out of order, or posted twice without cause.", stderr)
	var c demoConfig
	fs.IntVar(&c.instances, "instances", 3, "instances to start (the faults need 3)")
	fs.IntVar(&c.serviceIDs, "service-ids", 200, "service_ids")
	fs.IntVar(&c.batches, "batches", 10, "batches per service_id")
	flavor := fs.String("flavor", "sawtooth", "ledger API the simulator speaks: sawtooth | scabbard")
	fs.BoolVar(&c.asJSON, "json", false, "print the summary as one JSON object on stdout (the live table goes to stderr)")
	fs.BoolVar(&c.keep, "keep", false, "keep the scratch database (and cluster) afterwards")
	fs.DurationVar(&c.timeout, "timeout", 3*time.Minute, "give up (and report what is left as lost) after this long")
	claimsOnly := fs.Bool("claims-only", false, "the claim engine alone: instances share service_ids, one is killed, the others take over")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if c.instances < 2 || c.serviceIDs < 1 || c.batches < 1 {
		return fmt.Errorf("--instances must be at least 2, --service-ids and --batches at least 1")
	}
	if *claimsOnly {
		return demoClaims(ctx, c.instances, c.serviceIDs, c.keep, stdout)
	}
	var err error
	if c.flavor, err = dlt.ParseFlavor(*flavor); err != nil {
		return err
	}
	table := stdout
	if c.asJSON {
		table = stderr
	}
	sum, err := demoPipeline(ctx, c, table)
	if err != nil {
		return err
	}
	if err := cli.WriteSummary(stdout, c.asJSON, sum, sum.print); err != nil {
		return err
	}
	if sum.Lost > 0 || sum.OrderViolations > 0 || sum.DuplicatePostsUnexplained > 0 {
		return cli.ExitError{Code: 1, Msg: fmt.Sprintf("invariant violated: lost=%d order_violations=%d duplicate_posts_unexplained=%d",
			sum.Lost, sum.OrderViolations, sum.DuplicatePostsUnexplained)}
	}
	return nil
}

// Summary is what `demo --json` prints.
type Summary struct {
	BatchesTotal              int      `json:"batches_total"`
	Committed                 int      `json:"committed"`
	Invalid                   int      `json:"invalid"`
	Lost                      int      `json:"lost"`
	OrderViolations           int      `json:"order_violations"`
	Posts                     int      `json:"posts"`
	DuplicatePosts            int      `json:"duplicate_posts"`
	DuplicatePostsUnexplained int      `json:"duplicate_posts_unexplained"`
	StaleWritesRejected       int      `json:"stale_writes_rejected"`
	Takeovers                 int      `json:"takeovers"`
	MaxTakeoverSeconds        float64  `json:"max_takeover_seconds"`
	DurationSeconds           float64  `json:"duration_seconds"`
	Instances                 int      `json:"instances"`
	ServiceIDs                int      `json:"service_ids"`
	Flavor                    string   `json:"flavor"`
	Faults                    []string `json:"faults"`
	Database                  string   `json:"database"`
}

func (s Summary) print(w io.Writer) {
	fmt.Fprintf(w, "\nsummary (%s ledger, %d instances, %d service_ids, database: %s)\n", s.Flavor, s.Instances, s.ServiceIDs, s.Database)
	for _, f := range s.Faults {
		fmt.Fprintf(w, "  fault:                 %s\n", f)
	}
	fmt.Fprintf(w, "  batches:               %d (committed %d, invalid %d)\n", s.BatchesTotal, s.Committed, s.Invalid)
	fmt.Fprintf(w, "  lost:                  %d\n", s.Lost)
	fmt.Fprintf(w, "  order violations:      %d (per service_id, at the ledger)\n", s.OrderViolations)
	fmt.Fprintf(w, "  POSTs at the ledger:   %d, duplicates %d (each explained by an unknown outcome: %d unexplained)\n", s.Posts, s.DuplicatePosts, s.DuplicatePostsUnexplained)
	fmt.Fprintf(w, "  stale writes rejected: %d\n", s.StaleWritesRejected)
	fmt.Fprintf(w, "  takeovers:             %d claims, the slowest %.1fs after its owner failed\n", s.Takeovers, s.MaxTakeoverSeconds)
	fmt.Fprintf(w, "  duration:              %.1fs\n", s.DurationSeconds)
}
