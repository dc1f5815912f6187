package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"strings"

	"github.com/batchclaim/batchclaim/cmd/batchclaim/internal/chaos"
	"github.com/batchclaim/batchclaim/cmd/batchclaim/internal/cli"
	"github.com/batchclaim/batchclaim/cmd/batchclaim/internal/database"
)

func runChaos(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("chaos", "[flags]",
		"Runs instances of this binary against one Postgres and the ledger simulator and injects\n"+
			"faults chosen from a seed (printed first): SIGKILL, SIGSTOP past expiry-2, database links\n"+
			"cut, blackholed or slowed, backends terminated, Postgres restarted or failed over to its\n"+
			"synchronous standby, ledger 429/503/timeouts/lost answers/restarts, and clients enqueueing\n"+
			"the same service_ids at once. Batches keep arriving. Then it waits until every batch is\n"+
			"finished and checks the recorded history; it exits non-zero on any violation and names\n"+
			"the command that replays the seed. It starts its own throwaway cluster (local PostgreSQL\n"+
			"binaries) unless --database-url / DATABASE_URL is given, which skips the Postgres\n"+
			"restart and failover faults; --cluster patroni starts etcd and three Patroni members\n"+
			"instead and adds their faults (leader killed, switchover, failover, leader cut from\n"+
			"etcd, etcd restarted). Beside the faults it carries out operations: Retry, Cancel (also\n"+
			"of a running batch), run-at enqueues, Resume, retention and dropped idle claim rows\n"+
			"turned on, a starved pool, a long REPEATABLE READ snapshot and a drifting link delay;\n"+
			"the check includes the key's promise (one job of a service_id in flight, no job lost,\n"+
			"no terminal state undone but by Retry, no attempt number twice). See docs/chaos.md.", stderr)
	var c chaos.Config
	fs.DurationVar(&c.Duration, "duration", chaos.DurationDefault, "how long faults are injected (then the run quiesces and is checked)")
	fs.IntVar(&c.Instances, "instances", chaos.InstancesDefault, "instances (run processes) kept running, at least 3")
	fs.IntVar(&c.ServiceIDs, "service-ids", chaos.ServiceIDsDefault, "service_ids")
	fs.IntVar(&c.Batches, "batches", chaos.BatchesDefault, "batches per service_id stored at the start (more keep arriving)")
	fs.Int64Var(&c.Seed, "seed", 0, "seed of the fault schedule (default: a random one, printed)")
	kinds := fs.String("faults", "", "comma-separated fault kinds to inject (default: all of "+strings.Join(chaos.Kinds(), ",")+")")
	ops := fs.String("ops", "", "comma-separated operations to carry out, or none (default: all of "+strings.Join(chaos.Operations(), ",")+")")
	fs.StringVar(&c.HaltOnInvalid, "halt-on-invalid", chaos.HaltFromSeed, "run the instances with --halt-on-invalid: on, off, or auto (on for even seeds); operation resume needs it")
	fs.DurationVar(&c.Renew, "renew-interval", chaos.RenewDefault, "the instances' renew interval R")
	fs.DurationVar(&c.Expiry1, "expiry-1", chaos.Expiry1Default, "the instances' expiry-1 T1")
	fs.DurationVar(&c.Expiry2, "expiry-2", chaos.Expiry2Default, "the instances' expiry-2 T2")
	fs.DurationVar(&c.Allowance, "allowance", chaos.AllowanceDefault, "scheduling allowance added to every takeover bound")
	fs.DurationVar(&c.DropIdleAfter, "drop-idle-after", 0, "the instances' --drop-idle-after: drop the claim rows of service_ids idle this long (0: never); only claims with unfinished work are then judged for takeover")
	fs.StringVar(&c.LogDir, "log-dir", "", "directory for the instances' logs (default: a new temporary directory)")
	fs.StringVar(&c.Cluster, "cluster", chaos.ClusterLocal, "the cluster the run starts: local (a primary and a synchronous standby the harness promotes) or patroni (etcd and three Patroni members in synchronous_mode; adds the leader and etcd faults)")
	fs.BoolVar(&c.AsyncStandby, "async-standby", false, "demonstration: an asynchronous standby held a second behind before each failover (the guarantees break)")
	asJSON := fs.Bool("json", false, "print the report as one JSON object on stdout (progress goes to stderr)")
	dbURL := database.Flag(fs)
	cli.Bound(fs, "seed", math.MinInt64, math.MaxInt64, "any seed, as a report prints it")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return errorf("unexpected argument %q", fs.Arg(0))
	}
	if *kinds != "" {
		c.Kinds = strings.Split(*kinds, ",")
	}
	switch *ops {
	case "":
	case "none":
		c.Ops = []string{}
	default:
		c.Ops = strings.Split(*ops, ",")
	}
	if c.Seed == 0 {
		c.Seed = rand.Int64N(1<<31) + 1
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find own executable: %w", err)
	}
	c.Binary, c.DatabaseURL = self, *dbURL
	c.Progress = stdout
	if *asJSON {
		c.Progress = stderr
	}
	c.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	rep, err := chaos.Run(ctx, c)
	if err != nil {
		return fmt.Errorf("seed %d: %w", c.Seed, err)
	}
	if err := cli.WriteSummary(stdout, *asJSON, rep, rep.Print); err != nil {
		return err
	}
	if n := rep.Violated(); n > 0 {
		return cli.ExitError{Code: 1, Msg: fmt.Sprintf("%d invariant violations with seed %d; replay: %s", n, rep.Seed, rep.Replay)}
	}
	return nil
}
