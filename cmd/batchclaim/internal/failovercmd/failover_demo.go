package failovercmd

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/batchclaim/batchclaim/cmd/batchclaim/internal/cli"
	"github.com/batchclaim/batchclaim/cmd/batchclaim/internal/database"
	"github.com/batchclaim/batchclaim/cmd/batchclaim/internal/redact"
	"github.com/batchclaim/batchclaim/cmd/batchclaim/internal/subproc"
	"github.com/batchclaim/batchclaim/migrations"
	"github.com/batchclaim/batchclaim/patterns/failover"
	"github.com/batchclaim/batchclaim/pgdb"
)

// foSummary is what `failover demo --json` prints. The first four are the invariants: all 0
// in a clean run.
type foSummary struct {
	TwoPrimaries      int `json:"two_primaries"`
	NotMostUpToDate   int `json:"not_most_up_to_date"`
	OrphanedFailovers int `json:"orphaned_failovers"`
	LostCommands      int `json:"lost_commands"`

	Failovers          []foDecision `json:"failovers"`
	Decisions          int          `json:"decisions"`
	DecisionsCompleted int          `json:"decisions_completed"`
	ResumedByAnother   int          `json:"decisions_completed_by_another_node"`
	LockAcquisitions   int          `json:"lock_acquisitions"`
	LockExpired        int          `json:"lock_acquisitions_expired"`
	CommandsIssued     int64        `json:"commands_issued"`
	CommandsConsumed   int64        `json:"commands_consumed"`
	FinalEpoch         int64        `json:"final_epoch"`
	FinalPrimary       string       `json:"final_primary"`
	Faults             []string     `json:"faults"`
	DurationSeconds    float64      `json:"duration_seconds"`
	Database           string       `json:"database"`
}

type foDecision struct {
	Epoch       int64  `json:"epoch"`
	OldPrimary  string `json:"old_primary"`
	NewPrimary  string `json:"new_primary"`
	DecidedBy   string `json:"decided_by"`
	Outcome     string `json:"outcome"`
	CompletedBy string `json:"completed_by,omitempty"`
}

func (s foSummary) violations() int {
	return s.TwoPrimaries + s.NotMostUpToDate + s.OrphanedFailovers + s.LostCommands
}

func failoverDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("failover demo", "[flags]",
		"A shard of four nodes (separate processes of this binary) with made-up progress values\n"+
			"n1=1000 (the first primary), n2=950, n3=980, n4=970, on a throwaway database (DATABASE_URL\n"+
			"if set, else local PostgreSQL binaries, else Docker). n1 is SIGKILLed and a replica fails\n"+
			"over to the most up-to-date one; n1 comes back and follows; the new primary is SIGSTOPped\n"+
			"past its lease, and the replica that decides the next failover is SIGKILLed between its\n"+
			"decision and its commands, so that another finishes it after the lock expires; then the\n"+
			"stopped primary resumes and steps down. Ends with an audit of the recorded history and\n"+
			"exits non-zero if two primaries acted at once, a less up-to-date replica was chosen, a\n"+
			"failover was orphaned or a command lost.", stderr)
	asJSON := fs.Bool("json", false, "print the summary as one JSON object on stdout (the story goes to stderr)")
	keep := fs.Bool("keep", false, "keep the scratch database (and cluster) afterwards")
	timeout := fs.Duration("timeout", 2*time.Minute, "give up after this long")
	schema := database.SchemaFlag(fs)
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if err := pgdb.ValidateSchema(*schema); err != nil {
		return fmt.Errorf("--schema: %w", err)
	}
	out := stdout
	if *asJSON {
		out = stderr
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	sdb, err := database.NewScratch(ctx, "batchclaim_failover", *keep, out, logger, migrations.InSchema(*schema))
	if err != nil {
		return err
	}
	defer sdb.Close(ctx)
	pool, err := database.Open(ctx, sdb.URL, 4)
	if err != nil {
		return err
	}
	defer pool.Close()
	logDir, err := os.MkdirTemp("", "batchclaim-failover-")
	if err != nil {
		return err
	}
	db, err := pgdb.Open(pool, *schema)
	if err != nil {
		return err
	}
	d := &foDemo{db: db, schema: *schema, url: sdb.URL, logDir: logDir, out: out, kids: map[string]*subproc.Child{}, start: time.Now()}
	defer d.stopAll()
	sum, err := d.run(ctx)
	if err != nil {
		return fmt.Errorf("%w (node logs in %s)", err, logDir)
	}
	sum.Database = redact.URL(sdb.URL)
	if err := cli.WriteSummary(stdout, *asJSON, sum, sum.print); err != nil {
		return err
	}
	if sum.violations() > 0 {
		return cli.ExitError{Code: 1, Msg: fmt.Sprintf("invariant violated: two_primaries=%d not_most_up_to_date=%d orphaned_failovers=%d lost_commands=%d (node logs in %s)",
			sum.TwoPrimaries, sum.NotMostUpToDate, sum.OrphanedFailovers, sum.LostCommands, logDir)}
	}
	return nil
}

// The demo's nodes and timings. n1 is patient, so that the failover after it returns (it is
// then the most up-to-date node) is orchestrated by another replica and handed over to it.
type foNode struct {
	id       string
	progress int64
	patience string // "" means the demo's patience plus jitter
}

var foNodes = []foNode{{"n1", 1000, "4s"}, {"n2", 950, ""}, {"n3", 980, ""}, {"n4", 970, ""}}

const (
	foShard    = "demo"
	foPatience = 2 * time.Second
	// foStallEpoch is the failover whose orchestrator stops after its decision.
	foStallEpoch = 3
)

type foDemo struct {
	db     pgdb.DB
	schema string
	url    string
	logDir string
	out    io.Writer
	kids   map[string]*subproc.Child
	faults []string
	start  time.Time
}

func (d *foDemo) run(ctx context.Context) (foSummary, error) {
	fmt.Fprintf(d.out, "shard %q: n1=1000 (primary), n2=950, n3=980, n4=970; heartbeat 200ms, primary lease 1s, patience 2s + jitter, lock TTL 3s; logs in %s\n\n",
		foShard, d.logDir)
	for _, n := range foNodes {
		if err := d.startNode(n.id); err != nil {
			return foSummary{}, err
		}
	}
	all := []string{"n1", "n2", "n3", "n4"}
	if err := d.settled(ctx, all...); err != nil {
		return foSummary{}, err
	}

	// 1. The primary dies.
	d.fault(syscall.SIGKILL, "n1", "the primary")
	e, p, err := d.completed(ctx, 2, "")
	if err != nil {
		return foSummary{}, err
	}
	d.say("failover to epoch %d: %s is primary", e, p)
	if err := d.settled(ctx, foWithout(all, "n1")...); err != nil {
		return foSummary{}, err
	}

	// 2. It comes back (same node id, --bootstrap again): the shard's decision wins.
	if err := d.startNode("n1"); err != nil {
		return foSummary{}, err
	}
	d.say("n1 restarted")
	if err := d.settled(ctx, all...); err != nil {
		return foSummary{}, err
	}

	// 3. The new primary freezes; the replica that decides the next failover is killed
	// between its decision and its commands.
	stopped := p
	d.fault(syscall.SIGSTOP, stopped, "the primary, past its lease")
	orch, err := d.decidedBy(ctx, foStallEpoch)
	if err != nil {
		return foSummary{}, err
	}
	d.say("%s took the failover lock and recorded epoch %d, then stalled before sending any command", orch, foStallEpoch)
	d.fault(syscall.SIGKILL, orch, "the orchestrating replica, mid-failover")
	e, p, err = d.completed(ctx, foStallEpoch, orch)
	if err != nil {
		return foSummary{}, err
	}
	d.say("failover to epoch %d finished by another replica once the lock expired: %s is primary", e, p)
	live := foWithout(foWithout(all, stopped), orch)
	if err := d.settled(ctx, live...); err != nil {
		return foSummary{}, err
	}

	// 4. The frozen primary runs again and finds the newer epoch.
	if err := d.kids[stopped].Signal(syscall.SIGCONT); err != nil {
		return foSummary{}, err
	}
	d.say("SIGCONT %s", stopped)
	live = append(live, stopped)
	if err := d.settled(ctx, live...); err != nil {
		return foSummary{}, err
	}
	d.say("%s stepped down: replica of %s at epoch %d", stopped, p, e)

	// Quiescence: the killed orchestrator is dead by the database clock, every live queue drained.
	if err := d.waitFor(ctx, "the killed orchestrator's record to go stale and the queues to drain", func() (bool, error) {
		nodes, err := failover.Nodes(ctx, d.db, foShard, foPatience)
		if err != nil {
			return false, err
		}
		for _, n := range nodes {
			if n.NodeID == orch && n.Live {
				return false, nil
			}
		}
		a, err := failover.Check(ctx, d.db, foShard, foPatience)
		return a.LostCommands == 0, err
	}); err != nil {
		return foSummary{}, err
	}
	return d.summarize(ctx)
}

func (d *foDemo) startNode(id string) error {
	i := slices.IndexFunc(foNodes, func(n foNode) bool { return n.id == id })
	n := foNodes[i]
	args := []string{"failover", "node", "--database-url", d.url, "--shard", foShard, "--node-id", n.id,
		"--address", fmt.Sprintf("10.0.0.%d:6379", i+1), "--progress", strconv.FormatInt(n.progress, 10),
		"--heartbeat", "200ms", "--lease", "1s", "--patience", foPatience.String(), "--jitter", "1s", "--lock-ttl", "3s",
		"--poll", "500ms", "--stall-after-decision-epoch", strconv.Itoa(foStallEpoch), "--schema", d.schema}
	if n.patience != "" {
		args = append(args, "--patience", n.patience, "--jitter", "-1ns")
	}
	if n.id == "n1" {
		args = append(args, "--bootstrap")
	}
	k, err := subproc.Start(id, filepath.Join(d.logDir, id+".log"), args...)
	if err != nil {
		return err
	}
	d.kids[id] = k
	return nil
}

func (d *foDemo) fault(sig syscall.Signal, id, what string) {
	name := map[syscall.Signal]string{syscall.SIGKILL: "SIGKILL", syscall.SIGSTOP: "SIGSTOP"}[sig]
	_ = d.kids[id].Signal(sig)
	d.faults = append(d.faults, fmt.Sprintf("%s %s (%s)", name, id, what))
	fmt.Fprintf(d.out, "\n>>> %s %s, %s\n", name, id, what)
}

func (d *foDemo) say(format string, a ...any) {
	fmt.Fprintf(d.out, "t=%4.1fs  %s\n", time.Since(d.start).Seconds(), fmt.Sprintf(format, a...))
}

// settled waits until each of ids has registered the shard's current epoch and primary, in
// the role the decision gives it.
func (d *foDemo) settled(ctx context.Context, ids ...string) error {
	return d.waitFor(ctx, fmt.Sprintf("%s to follow the shard's decision", strings.Join(ids, ", ")), func() (bool, error) {
		shard, err := failover.Shard(ctx, d.db, foShard)
		if err != nil {
			return false, nil //nolint:nilerr // not bootstrapped yet
		}
		nodes, err := failover.Nodes(ctx, d.db, foShard, foPatience)
		if err != nil {
			return false, err
		}
		ok := 0
		for _, n := range nodes {
			want := failover.RoleReplica
			if n.NodeID == shard.PrimaryID {
				want = failover.RolePrimary
			}
			if slices.Contains(ids, n.NodeID) && n.Live && n.Epoch == shard.Epoch && n.PrimaryID == shard.PrimaryID && n.Role == want {
				ok++
			}
		}
		return ok == len(ids), nil
	})
}

// completed waits for a completed decision at epoch >= minEpoch not completed by notBy.
func (d *foDemo) completed(ctx context.Context, minEpoch int64, notBy string) (int64, string, error) {
	var epoch int64
	var primary string
	err := d.waitFor(ctx, fmt.Sprintf("a completed failover to epoch %d or later", minEpoch), func() (bool, error) {
		ds, err := failover.Decisions(ctx, d.db, foShard)
		if err != nil {
			return false, err
		}
		for _, x := range ds {
			if x.Epoch >= minEpoch && x.Outcome == failover.DecisionCompleted && x.CompletedBy != "" && x.CompletedBy != notBy {
				epoch, primary = x.Epoch, x.NewPrimary
				return true, nil
			}
		}
		return false, nil
	})
	return epoch, primary, err
}

// decidedBy waits for the decision of epoch and returns who recorded it.
func (d *foDemo) decidedBy(ctx context.Context, epoch int64) (string, error) {
	var by string
	err := d.waitFor(ctx, fmt.Sprintf("a replica to decide epoch %d", epoch), func() (bool, error) {
		ds, err := failover.Decisions(ctx, d.db, foShard)
		if err != nil {
			return false, err
		}
		for _, x := range ds {
			if x.Epoch == epoch {
				by = x.DecidedBy
				return true, nil
			}
		}
		return false, nil
	})
	return by, err
}

// waitFor polls cond every 50ms until it holds, fails, a node exits unexpectedly or ctx ends.
func (d *foDemo) waitFor(ctx context.Context, what string, cond func() (bool, error)) error {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		ok, err := cond()
		if err != nil {
			return fmt.Errorf("waiting for %s: %w", what, err)
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("gave up waiting for %s: %w", what, ctx.Err())
		case <-t.C:
		}
	}
}

func (d *foDemo) summarize(ctx context.Context) (foSummary, error) {
	a, err := failover.Check(ctx, d.db, foShard, foPatience)
	if err != nil {
		return foSummary{}, err
	}
	s := foSummary{
		TwoPrimaries: a.TwoPrimaries, NotMostUpToDate: a.NotMostUpToDate, OrphanedFailovers: a.OrphanedFailovers, LostCommands: a.LostCommands,
		Decisions: a.Decisions, DecisionsCompleted: a.Completed, ResumedByAnother: a.Resumed,
		LockAcquisitions: a.LockAcquisitions, LockExpired: a.LockExpired,
		CommandsIssued: a.CommandsIssued, CommandsConsumed: a.CommandsConsumed,
		FinalEpoch: a.Epoch, FinalPrimary: a.Primary, Faults: d.faults,
		DurationSeconds: time.Since(d.start).Seconds(),
	}
	ds, err := failover.Decisions(ctx, d.db, foShard)
	if err != nil {
		return s, err
	}
	for _, x := range ds {
		s.Failovers = append(s.Failovers, foDecision{Epoch: x.Epoch, OldPrimary: x.OldPrimary, NewPrimary: x.NewPrimary,
			DecidedBy: x.DecidedBy, Outcome: cmp.Or(x.Outcome, "open"), CompletedBy: x.CompletedBy})
	}
	return s, nil
}

func (d *foDemo) stopAll() {
	for _, k := range d.kids {
		k.Stop(5 * time.Second)
	}
}

func (s foSummary) print(w io.Writer) {
	fmt.Fprintf(w, "\nsummary (database: %s)\n", s.Database)
	for _, f := range s.Faults {
		fmt.Fprintf(w, "  fault:                %s\n", f)
	}
	for _, f := range s.Failovers {
		by := ""
		if f.CompletedBy != "" && f.CompletedBy != f.DecidedBy {
			by = ", completed by " + f.CompletedBy
		}
		fmt.Fprintf(w, "  failover:             epoch %d, %s -> %s, decided by %s, %s%s\n", f.Epoch, f.OldPrimary, f.NewPrimary, f.DecidedBy, f.Outcome, by)
	}
	fmt.Fprintf(w, "  lock acquisitions:    %d (%d left to expire by a dead holder)\n", s.LockAcquisitions, s.LockExpired)
	fmt.Fprintf(w, "  commands:             %d issued, %d consumed\n", s.CommandsIssued, s.CommandsConsumed)
	fmt.Fprintf(w, "  two primaries:        %d\n", s.TwoPrimaries)
	fmt.Fprintf(w, "  not most up to date:  %d\n", s.NotMostUpToDate)
	fmt.Fprintf(w, "  orphaned failovers:   %d\n", s.OrphanedFailovers)
	fmt.Fprintf(w, "  lost commands:        %d\n", s.LostCommands)
	fmt.Fprintf(w, "  final:                %s primary at epoch %d; %.1fs\n", s.FinalPrimary, s.FinalEpoch, s.DurationSeconds)
}

func foWithout(ids []string, drop string) []string {
	return slices.DeleteFunc(slices.Clone(ids), func(s string) bool { return s == drop })
}
