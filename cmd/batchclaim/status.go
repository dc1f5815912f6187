package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/claims"
	"github.com/batchclaim/batchclaim/cmd/batchclaim/internal/cli"
	"github.com/batchclaim/batchclaim/cmd/batchclaim/internal/database"
	"github.com/batchclaim/batchclaim/inspect"
	"github.com/batchclaim/batchclaim/pgdb"
)

func runStatus(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("status", "[flags]",
		"Shows the registered instances (heartbeat age by the database clock, lease phase, claims\nheld), the number of service_ids and how many are unclaimed, batches by state, the service_ids\nwith unfinished batches (oldest first), halted service_ids and the retention job's last run.", stderr)
	dbURL := database.Flag(fs)
	schema := database.SchemaFlag(fs)
	asJSON := fs.Bool("json", false, "print one JSON object instead of tables")
	listClaims := fs.Int("claims", 0, "also list up to N claims with their effective expiries (-1: all)")
	listServices := fs.Int("services", 20, "list up to N service_ids with unfinished batches, oldest first (-1: all)")
	job := fs.Int64("job", 0, "show one job (batch) by its seq instead: its kind, state, attempts, last error and recorded output")
	cli.Bound(fs, "claims", -1, 1_000_000, "-1: all")
	cli.Bound(fs, "services", -1, 1_000_000, "-1: all")
	cli.Bound(fs, "job", 0, math.MaxInt64, "a batch's seq")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	pool, err := database.OpenSchema(ctx, *dbURL, *schema, 2)
	if err != nil {
		return err
	}
	defer pool.Close()
	q := pgdb.InSchema(pool, *schema)
	if *job != 0 {
		return database.Explain(*schema, runStatusJob(ctx, q, *job, *asJSON, stdout))
	}
	snap, err := claims.ReadSnapshot(ctx, q, *listClaims)
	if err != nil {
		return database.Explain(*schema, err)
	}
	work, err := inspect.Batches(ctx, q, *listServices)
	if err != nil {
		return database.Explain(*schema, err)
	}
	ret, err := inspect.Retention(ctx, q)
	if err != nil {
		return database.Explain(*schema, err)
	}
	dbs, err := readDatabaseStatus(ctx, q)
	if err != nil {
		return database.Explain(*schema, err)
	}
	kinds, err := inspect.Kinds(ctx, q)
	if err != nil {
		return database.Explain(*schema, err)
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			claims.Snapshot
			Batches   inspect.BatchStatus     `json:"batches"`
			Kinds     []inspect.KindStatus    `json:"kinds"`
			Retention inspect.RetentionStatus `json:"retention"`
			Database  databaseStatus          `json:"database"`
		}{snap, work, kinds, ret, dbs})
	}
	dbs.print(stdout)
	printSnapshot(stdout, snap)
	printBatches(stdout, work)
	printKinds(stdout, kinds)
	printRetention(stdout, ret)
	return nil
}

// printBatches prints the batch part of `status`.
func printBatches(w io.Writer, b inspect.BatchStatus) {
	var parts []string
	for _, st := range batchclaim.States {
		if n := b.ByState[string(st)]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", st, n))
		}
	}
	if len(parts) == 0 {
		parts = []string{"none"}
	}
	fmt.Fprintf(w, "\nbatches: %s\n", strings.Join(parts, ", "))
	fmt.Fprintf(w, "service_ids with unfinished batches: %d; oldest unfinished batch: %.1fs\n", b.OpenServices, b.OldestOpenSeconds)
	if len(b.Services) > 0 {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "SERVICE_ID\tOLDEST OPEN\tBATCHES BY STATE")
		for _, s := range b.Services {
			var st []string
			for _, k := range batchclaim.States {
				if n := s.ByState[string(k)]; n > 0 {
					st = append(st, fmt.Sprintf("%s %d", k, n))
				}
			}
			fmt.Fprintf(tw, "%s\t%.1fs\t%s\n", printable(s.ServiceID), s.OldestOpenSeconds, strings.Join(st, ", "))
		}
		tw.Flush()
	}
	for _, h := range b.Halted {
		fmt.Fprintf(w, "HALTED %s at seq %d since %s: %s (batchclaim resume SERVICE_ID lifts it)\n", printable(h.ServiceID), h.Seq, h.At.Format(time.RFC3339), printable(h.Reason))
	}
}

func printSnapshot(w io.Writer, s claims.Snapshot) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "INSTANCE\tHOST\tVERSION\tHEARTBEAT AGE\tLEASE\tCLAIMS")
	for _, i := range s.Instances {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.1fs\t%s\t%d\n", printable(i.Name), printable(i.Host), printable(cmp.Or(i.Version, "-")), i.HeartbeatAgeSeconds, i.Phase, i.Claims)
	}
	tw.Flush()
	fmt.Fprintf(w, "\nservice_ids: %d, unclaimed: %d\n", s.ServiceIDs, s.Unclaimed)
	if len(s.Claims) == 0 {
		return
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SERVICE_ID\tOWNER\tEPOCH\tPHASE\tBUSY\tEXPIRY_1\tEXPIRY_2")
	for _, c := range s.Claims {
		busy := "-"
		if c.Busy {
			busy = "yes"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\n", printable(c.ServiceID), printable(c.ClaimantName), c.Epoch, c.Phase, busy,
			fmtTime(c.Expiry1), fmtTime(c.Expiry2))
	}
	tw.Flush()
}

// printable is s as stored when it holds only visible characters and plain spaces, else s
// quoted with every other character escaped (\x9b, \u202e...): a service_id stored before
// batchclaim.ValidateServiceID refused such characters, an instance name or a ledger's
// reason cannot write escape sequences to the terminal, or pass for another name.
func printable(s string) string {
	for i, r := range s {
		if r == utf8.RuneError {
			if _, size := utf8.DecodeRuneInString(s[i:]); size == 1 {
				return strconv.QuoteToASCII(s)
			}
		}
		if r != ' ' && (!unicode.IsGraphic(r) || unicode.In(r, unicode.Cf, unicode.Co, unicode.Zs, unicode.Zl, unicode.Zp)) {
			return strconv.QuoteToASCII(s)
		}
	}
	return s
}
