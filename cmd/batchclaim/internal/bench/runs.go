package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batchclaim/batchclaim/cmd/batchclaim/internal/database"
	"github.com/batchclaim/batchclaim/dlt"
	"github.com/batchclaim/batchclaim/dlt/dltsim"
)

// The latency, defaults and many-claims scenarios run `batchclaim run` processes with their
// default flags against the ledger simulator: what a user who sets no flag gets. The few
// flags they are given do not touch the data path: where the database and the ledger are,
// a name, an HTTP address the kernel picks (two processes cannot share run's default port)
// or none, and JSON logs, from which the bench reads that address.

// startLedger starts a Sawtooth simulator (fixed seed) for a scenario's instances and makes
// the directory their logs go to; the caller closes the simulator.
func startLedger(scenario string) (sim *dltsim.Sim, url, logDir string, err error) {
	if sim, err = dltsim.New(dltsim.Config{Flavor: dlt.FlavorSawtooth, Seed: 1}); err != nil {
		return nil, "", "", err
	}
	if url, err = sim.Start("127.0.0.1:0"); err != nil {
		_ = sim.Close()
		return nil, "", "", err
	}
	if logDir, err = os.MkdirTemp("", "batchclaim-bench-"+scenario+"-"); err != nil {
		_ = sim.Close()
		return nil, "", "", err
	}
	return sim, url, logDir, nil
}

// scratchWithAdmin creates a scenario's scratch database and a small pool on it for the
// bench's own reads; the caller closes the pool, then the database.
func scratchWithAdmin(ctx context.Context, prefix string, keep bool, info io.Writer) (*database.Scratch, *pgxpool.Pool, error) {
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	db, err := database.NewScratch(ctx, prefix, keep, info, logger)
	if err != nil {
		return nil, nil, err
	}
	admin, err := database.Open(ctx, db.URL, 2)
	if err != nil {
		db.Close(ctx)
		return nil, nil, err
	}
	return db, admin, nil
}

// runArgs is the command line of one such process; extra comes last, so that it can
// override any of them (a passthrough flag of the scenario).
func runArgs(dbURL, simURL, name, listen string, extra []string) []string {
	return append([]string{"run", "--database-url", dbURL, "--dlt-url", simURL, "--instance-name", name,
		"--listen", listen, "--log-format", "json"}, extra...)
}

// shownArgs is runArgs as a scenario's JSON line shows it: the scratch database's and the
// simulator's addresses, which change every run, left out.
func shownArgs(extra []string) []string {
	return append([]string{"run", "--database-url", "<scratch>", "--dlt-url", "<simulator>", "--instance-name", "<name>",
		"--listen", "<127.0.0.1:0 or none>", "--log-format", "json"}, extra...)
}

// waitReady waits until the fleet's claims are balanced over its processes and, when they
// listen, every process's address is known.
func (f *fleet) waitReady(ctx context.Context, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		for _, k := range f.kids {
			if k.Exited() && !k.signalled {
				return fmt.Errorf("%s exited on its own (%v); see %s", k.Name, k.Err, f.logPath(k.Name))
			}
		}
		if err := f.resolve(ctx); err != nil {
			return err
		}
		if f.listen {
			if err := f.readAddrs(); err != nil {
				return err
			}
		}
		s, err := readSpread(ctx, f.admin)
		if err != nil {
			return err
		}
		if s.balanced(f.k, f.running()) && (!f.listen || f.allListening()) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready after %s: %d live, %d claims free, held %d..%d (logs in %s)",
				limit, len(s.held), s.free, s.lo, s.hi, f.logDir)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// runHasFlag reports whether the `run` of the batchclaim binary bin has the flag --name
// (read from its --help), so that a scenario can pass a flag that another version may not
// have yet.
func runHasFlag(bin, name string) (bool, error) {
	var out bytes.Buffer
	cmd := exec.Command(bin, "run", "--help")
	cmd.Stdout, cmd.Stderr = &out, &out
	_ = cmd.Run() // --help exits non-zero on some flag packages; the text is what counts
	if !strings.Contains(out.String(), "-database-url") {
		return false, fmt.Errorf("run --help printed no flags: %q", out.String())
	}
	return helpHasFlag(out.String(), name), nil
}

// helpHasFlag reports whether a flag package's help text lists the flag -name.
func helpHasFlag(help, name string) bool {
	return regexp.MustCompile(`(?m)^\s+-` + regexp.QuoteMeta(name) + `(\s|$)`).MatchString(help)
}

// flagName is the name of the flag an argument like --notify=false sets.
func flagName(arg string) string {
	name, _, _ := strings.Cut(strings.TrimLeft(arg, "-"), "=")
	return name
}

// storeBatches stores batch n of every service_id in svcs in one statement and returns the
// database clock read just before it.
func storeBatches(ctx context.Context, pool *pgxpool.Pool, svcs []string, n int) (time.Time, error) {
	var at time.Time
	if err := pool.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&at); err != nil {
		return at, err
	}
	// One INSERT for the whole round, as an embedder's own SQL may store work: the claim
	// rows exist, each service_id gets one batch, and the statement's trigger wakes the
	// holders once. (ingest.Enqueue, a statement per batch under the service_id's enqueue
	// lock, would make the store, not the instances, what the scenario measures.)
	ids, lists := make([]string, len(svcs)), make([][]byte, len(svcs))
	for i, svc := range svcs {
		ids[i], lists[i] = dlt.FakeBatch(svc, n)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO batchclaim.batches (service_id, batch_id, payload, ledger)
		SELECT unnest($1::text[]), unnest($2::text[]), unnest($3::bytea[]), true`, svcs, ids, lists); err != nil {
		return at, fmt.Errorf("store round %d: %w", n, err)
	}
	return at, nil
}

// quantiles returns the p50 and p99 of xs (sorted in place) and its maximum; zeros when
// xs is empty.
func quantiles(xs []float64) (p50, p99, maxX float64) {
	if len(xs) == 0 {
		return 0, 0, 0
	}
	slices.Sort(xs)
	return round3(xs[len(xs)/2]), round3(xs[len(xs)*99/100]), round3(xs[len(xs)-1])
}

// serviceIDs returns n service_ids named prefix-000000 on, in sort order.
func serviceIDs(prefix string, n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s-%06d", prefix, i)
	}
	return ids
}
