package heartbeat_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batchclaim/batchclaim/patterns/heartbeat"
	"github.com/batchclaim/batchclaim/pgdb"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
)

// envChild, when set in the environment, makes the test binary run one heartbeat-service
// instance instead of the tests: the fault tests start it as a separate OS process so that
// they can SIGKILL and SIGSTOP it.
const envChild = "HEARTBEAT_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(envChild) != "" {
		os.Exit(childMain())
	}
	dbtest.Main(m)
}

// childMain runs a Service configured from the environment until SIGTERM.
func childMain() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	pool, err := pgxpool.New(ctx, os.Getenv(envChild))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer pool.Close()
	db, err := pgdb.Open(pool, "")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	svc, err := heartbeat.New(db, childConfig(os.Getenv("HEARTBEAT_TEST_NAME"), os.Getenv("HEARTBEAT_TEST_WEBHOOK"), logger))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := svc.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// childConfig is the configuration of every instance in the fault tests: I = 100ms,
// T = 1s, a step every 50ms.
func childConfig(name, webhook string, logger *slog.Logger) heartbeat.Config {
	return heartbeat.Config{Name: name, ElectionInterval: 100 * time.Millisecond, ElectionTimeout: time.Second,
		StepInterval: 50 * time.Millisecond, DeliveryInterval: 50 * time.Millisecond, WebhookURL: webhook,
		RetryBase: 50 * time.Millisecond, RetryMax: 200 * time.Millisecond, Logger: logger}
}
