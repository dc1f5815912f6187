package failover_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batchclaim/batchclaim/patterns/failover"
	"github.com/batchclaim/batchclaim/pgdb"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
)

// childEnv, when set, makes the test binary one node of a shard for the fault tests instead
// of running tests. Its value is a childSpec in JSON.
const childEnv = "FAILOVER_TEST_NODE"

type childSpec struct {
	URL, Shard, NodeID string
	Progress           int64
	Bootstrap          bool
	// StallAtEpoch: after deciding a failover to this epoch, print "decided" and wait for a
	// line on stdin before going on.
	StallAtEpoch int64
	// Patience, when set, replaces the test patience and its jitter.
	Patience time.Duration
}

func TestMain(m *testing.M) {
	if spec := os.Getenv(childEnv); spec != "" {
		os.Exit(runChild(spec))
	}
	dbtest.Main(m)
}

func runChild(spec string) int {
	var s childSpec
	if err := json.Unmarshal([]byte(spec), &s); err != nil {
		fmt.Println("bad spec:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	pool, err := pgxpool.New(ctx, s.URL)
	if err != nil {
		fmt.Println(err)
		return 2
	}
	defer pool.Close()
	cfg := testConfig(s.Shard, s.NodeID, s.Progress)
	cfg.Bootstrap = s.Bootstrap
	if s.Patience > 0 {
		cfg.Patience, cfg.PatienceJitter = s.Patience, -1
	}
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{Level: slog.LevelInfo}))
	if s.StallAtEpoch > 0 {
		stdin := bufio.NewScanner(os.Stdin)
		cfg.AfterDecision = func(ctx context.Context, d failover.Decision) {
			if d.Epoch == s.StallAtEpoch {
				fmt.Println("decided", d.Epoch)
				stdin.Scan()
			}
		}
	}
	db, err := pgdb.Open(pool, "")
	if err != nil {
		fmt.Println(err)
		return 2
	}
	n, err := failover.New(db, cfg)
	if err != nil {
		fmt.Println(err)
		return 2
	}
	_ = n.Run(ctx)
	return 0
}
