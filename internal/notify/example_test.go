package notify_test

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/batchclaim/batchclaim/internal/notify"
	"github.com/batchclaim/batchclaim/testkit/dbtest"
)

// Run listens on a connection taken out of a pool. OnListen runs once the LISTEN is in
// effect, so a notification sent after it is heard; OnNotify gets each one. When the
// connection is lost (here its backend is terminated), OnLost says so, Run connects and
// listens again, and OnListen runs again: a user looks for work there, since whatever was
// notified meanwhile went unheard.
func ExampleRun() {
	pool, drop := dbtest.ExamplePool()
	defer drop()
	ctx, cancel := context.WithCancel(context.Background())

	listening := make(chan uint32, 2) // the backend of each connection that listens
	notes := make(chan string, 4)
	var backend uint32 // of the connection Dial made last
	done := make(chan error, 1)
	go func() {
		done <- notify.Run(ctx, notify.Config{
			Dial: func(ctx context.Context) (*pgx.Conn, error) {
				c, err := pool.Acquire(ctx)
				if err != nil {
					return nil, err
				}
				conn := c.Hijack() // the connection is Run's now, and no longer the pool's
				backend = conn.PgConn().PID()
				return conn, nil
			},
			Channels: []string{"new_work"},
			OnListen: func() { listening <- backend },
			OnNotify: func(n *pgconn.Notification) { notes <- n.Channel + ": " + n.Payload },
			OnLost:   func(err error, retryIn time.Duration) { fmt.Println("lost the connection") },
		})
	}()
	// Each wait is bounded for a stalled run only; nothing here depends on how long it takes.
	var pid uint32
	waitListen := func() {
		select {
		case pid = <-listening:
		case <-time.After(10 * time.Second):
			panic("Run did not listen")
		}
	}
	notifyAndWait := func(payload string) {
		if _, err := pool.Exec(ctx, `SELECT pg_notify('new_work', $1)`, payload); err != nil {
			panic(err)
		}
		select {
		case n := <-notes:
			fmt.Println("heard", n)
		case <-time.After(10 * time.Second):
			panic("notification " + payload + " not heard")
		}
	}

	waitListen()
	fmt.Println("listening")
	notifyAndWait("order-42")
	notifyAndWait("order-43")

	if _, err := pool.Exec(ctx, `SELECT pg_terminate_backend($1)`, pid); err != nil {
		panic(err)
	}
	waitListen()
	fmt.Println("listening again")
	notifyAndWait("order-44")

	cancel()
	fmt.Println("Run:", <-done)
	// Output:
	// listening
	// heard new_work: order-42
	// heard new_work: order-43
	// lost the connection
	// listening again
	// heard new_work: order-44
	// Run: <nil>
}
