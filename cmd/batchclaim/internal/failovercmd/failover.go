package failovercmd

import (
	"context"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/batchclaim/batchclaim/cmd/batchclaim/internal/cli"
	"github.com/batchclaim/batchclaim/cmd/batchclaim/internal/database"
	"github.com/batchclaim/batchclaim/patterns/failover"
	"github.com/batchclaim/batchclaim/pgdb"
)

// Command is `batchclaim failover node|demo`.
func Command(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		switch args[0] {
		case "node":
			return failoverNode(ctx, args[1:], stdout, stderr)
		case "demo":
			return failoverDemo(ctx, args[1:], stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "Usage: batchclaim failover node|demo [flags]\n\n"+
		"  node  run one node of a shard: register every heartbeat interval, renew the primary\n"+
		"        lease or follow the recorded primary, consume this node's command queue, and as a\n"+
		"        replica take the failover lock when the primary is silent past its patience\n"+
		"  demo  a shard of four processes with made-up progress values: the primary SIGKILLed,\n"+
		"        brought back, the next primary SIGSTOPped and an orchestrating replica SIGKILLed\n"+
		"        mid-failover; checks that no two primaries acted at once, that the most\n"+
		"        up-to-date live replica won, that no failover was orphaned and no command lost\n")
	if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
		return nil
	}
	return cli.ErrUsage
}

func failoverNode(ctx context.Context, args []string, _, stderr io.Writer) error {
	fs := cli.NewFlagSet("failover node", "--shard S --node-id ID [flags]",
		"Runs one node of a shard until SIGTERM or SIGINT. The node's progress (last_txn_id) is the\n"+
			"made-up --progress value. With --bootstrap, a shard that does not exist yet is created\n"+
			"with this node as its primary at epoch 1; an existing shard's recorded decision wins.", stderr)
	dbURL := database.Flag(fs)
	schema := database.SchemaFlag(fs)
	var cfg failover.Config
	fs.StringVar(&cfg.Shard, "shard", "", "shard name (required)")
	fs.StringVar(&cfg.NodeID, "node-id", "", "this node's id, the same across restarts (required)")
	fs.StringVar(&cfg.Address, "address", "", "this node's private address, sent to replicas")
	fs.Int64Var(&cfg.LastTxnID, "progress", 0, "this node's last applied transaction id (higher = more up to date)")
	fs.BoolVar(&cfg.Bootstrap, "bootstrap", false, "create the shard with this node as primary if it does not exist")
	fs.DurationVar(&cfg.HeartbeatInterval, "heartbeat", 0, "N: heartbeat interval (default 1s)")
	fs.DurationVar(&cfg.PrimaryLease, "lease", 0, "primary lease per heartbeat (default 3N)")
	fs.DurationVar(&cfg.Patience, "patience", 0, "how long a replica waits for a silent primary (default lease + 2N)")
	fs.DurationVar(&cfg.PatienceJitter, "jitter", 0, "bound of this node's random addition to patience (default patience/2; negative: none)")
	fs.DurationVar(&cfg.LockTTL, "lock-ttl", 0, "failover lock TTL (default 2 x patience)")
	fs.DurationVar(&cfg.PollInterval, "poll", 0, "command queue polling interval when no notification arrives (default 1s)")
	fs.BoolVar(&cfg.DisableListen, "no-listen", false, "poll the command queue only, without LISTEN/NOTIFY")
	stallAt := fs.Int64("stall-after-decision-epoch", 0, "used by failover demo: after deciding a failover to this epoch, stop (holding the lock) until killed")
	newLogger := cli.LogFlags(fs)
	cli.Bound(fs, "progress", 0, math.MaxInt64, "a transaction id")
	cli.BoundDuration(fs, "jitter", -24*time.Hour, 24*time.Hour, "negative: none")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	logger, err := newLogger(stderr)
	if err != nil {
		return err
	}
	cfg.Logger = logger.With("node_id", cfg.NodeID)
	if *stallAt > 0 {
		cfg.AfterDecision = func(ctx context.Context, d failover.Decision) {
			if d.Epoch == *stallAt {
				cfg.Logger.Warn("stalling in the middle of the failover, holding the lock", "epoch", d.Epoch, "new_primary", d.NewPrimary)
				<-ctx.Done()
			}
		}
	}
	if _, err := cfg.Resolve(); err != nil { // checks the configuration before connecting
		return err
	}
	pool, err := database.OpenSchema(ctx, *dbURL, *schema, 4)
	if err != nil {
		return err
	}
	defer pool.Close()
	db, err := pgdb.Open(pool, *schema)
	if err != nil {
		return err
	}
	n, err := failover.New(db, cfg)
	if err != nil {
		return err
	}
	cfg.Logger.Info("node starting", "shard", cfg.Shard, "progress", cfg.LastTxnID, "patience", n.Patience().Round(time.Millisecond), "schema", db.Schema())
	if err := n.Run(ctx); err != nil && ctx.Err() == nil {
		return database.Explain(db.Schema(), err)
	}
	return nil
}
