package election_test

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batchclaim/batchclaim/patterns/election"
	"github.com/batchclaim/batchclaim/pgdb"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
)

// helperEnv, when set to a database URL, makes the test binary run as a helper process: an
// elector for role "r" that, while primary, keeps making fenced writes (each in a
// transaction held open for 150ms), and reports
// "elected EPOCH" and "stepped-down EPOCH REASON" lines on stdout. The process tests SIGKILL
// and SIGSTOP it.
const helperEnv = "ELECTION_TEST_HELPER_DB"

func TestMain(m *testing.M) {
	if url := os.Getenv(helperEnv); url != "" {
		os.Exit(helperMain(url))
	}
	dbtest.Main(m)
}

func helperMain(url string) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		fmt.Println("error", err)
		return 2
	}
	defer pool.Close()
	db, err := pgdb.Open(pool, "")
	if err != nil {
		fmt.Println("error", err)
		return 2
	}
	var el *election.Elector
	el, err = election.New(db, election.Config{
		Roles: []string{"r"}, Name: "helper", HeartbeatInterval: testInterval, Timeout: testTimeout,
		OnElected: func(ctx context.Context, t election.Term) {
			fmt.Printf("elected %d\n", t.Epoch)
			for ctx.Err() == nil {
				_ = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
					if err := el.Fence(ctx, tx, t); err != nil {
						return err
					}
					if _, err := tx.Exec(ctx, `INSERT INTO test_writes (name, epoch) VALUES ('helper', $1)`, t.Epoch); err != nil {
						return err
					}
					// Hold the fenced transaction open for a while, so that a SIGSTOP most
					// likely lands inside it, with the term row locked.
					select {
					case <-ctx.Done():
					case <-time.After(150 * time.Millisecond):
					}
					return nil
				})
				select {
				case <-ctx.Done():
				case <-time.After(20 * time.Millisecond):
				}
			}
		},
		OnSteppedDown: func(t election.Term, why election.StepDownReason) {
			fmt.Printf("stepped-down %d %s\n", t.Epoch, why)
		},
	})
	if err != nil {
		fmt.Println("error", err)
		return 2
	}
	_ = el.Run(ctx)
	return 0
}
