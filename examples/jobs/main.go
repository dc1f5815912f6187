// Command jobs is batchclaim's job runner as a River user would write it: typed jobs of two
// kinds, inserted in the application's own transaction, run in order per key (an order),
// with a middleware around every job, a timeout, a retry and a recorded output.
//
//	DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable go run ./examples/jobs
//
// It migrates the database (batchclaim's tables live in their own schema, batchclaim), creates
// a table of its own (shop_orders), runs one instance until its jobs are finished and prints
// what happened. docs/jobs.md explains each part and lists River's calls beside batchclaim's.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/claims"
	"github.com/batchclaim/batchclaim/jobs"
	"github.com/batchclaim/batchclaim/migrations"
	"github.com/batchclaim/batchclaim/node"
	"github.com/batchclaim/batchclaim/observer"
	"github.com/batchclaim/batchclaim/submitter"
)

// ChargeCard charges an order's card. Its kind has a timeout of its own (Timeout below).
type ChargeCard struct {
	Order   string `json:"order"`
	Cents   int    `json:"cents"`
	Network string `json:"network"` // slowpay never answers
}

func (ChargeCard) Kind() string { return "charge_card" }

// SendReceipt mails the receipt of a paid order and records the receipt's id as its output.
type SendReceipt struct {
	Order string `json:"order"`
	Email string `json:"email"`
}

func (SendReceipt) Kind() string { return "send_receipt" }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	url := os.Getenv("DATABASE_URL")
	if url == "" {
		fmt.Fprintln(os.Stderr, "set DATABASE_URL to a Postgres database, e.g. postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable")
		os.Exit(2)
	}
	if err := run(ctx, url, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "jobs:", err)
		os.Exit(1)
	}
}

// printer writes whole lines from the workers, the middleware and the events.
type printer struct {
	mu sync.Mutex
	w  io.Writer
}

func (p *printer) say(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, format+"\n", args...)
}

// chargeWorker charges cards. The slowpay network never answers: the job's own timeout (set
// at insert) ends it.
type chargeWorker struct{ out *printer }

func (w chargeWorker) Timeout(*jobs.Job[ChargeCard]) time.Duration { return 5 * time.Second }

func (w chargeWorker) Work(ctx context.Context, j *jobs.Job[ChargeCard]) error {
	if j.Args.Network == "slowpay" {
		<-ctx.Done() // the card network does not answer
		return fmt.Errorf("card network: %w", ctx.Err())
	}
	w.out.say("%s: charged %d.%02d", j.Args.Order, j.Args.Cents/100, j.Args.Cents%100)
	return nil
}

func run(ctx context.Context, databaseURL string, stdout io.Writer) error {
	out := &printer{w: stdout}
	if err := migrations.Up(ctx, databaseURL); err != nil {
		return err
	}
	pool, err := pgxpool.New(ctx, databaseURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS shop_orders (id bigserial PRIMARY KEY, email text NOT NULL, cents int NOT NULL)`); err != nil {
		return err
	}

	// Two kinds, one worker each.
	workers := jobs.NewWorkers()
	jobs.AddWorker[ChargeCard](workers, chargeWorker{out})
	jobs.AddWorker(workers, jobs.WorkFunc(func(ctx context.Context, j *jobs.Job[SendReceipt]) error {
		if j.Attempt() == 1 {
			return errors.New("mail server busy") // retried after a backoff, before the key's next job
		}
		out.say("%s: receipt mailed to %s", j.Args.Order, j.Args.Email)
		return jobs.RecordOutput(ctx, map[string]string{"receipt": "R-" + strings.TrimPrefix(j.Args.Order, "order-")})
	}))

	// Orders and their jobs, each order in one transaction: the order is stored with its
	// jobs or not at all. The jobs of one order (the key) run one at a time, in this order.
	var keys []string
	for _, o := range []order{
		{email: "ann@example.com", cents: 1250, network: "visa", commit: true},
		{email: "bo@example.com", cents: 990, network: "slowpay", commit: true},
		{email: "cy@example.com", cents: 500, network: "visa", commit: false}, // rolled back: no order, no job
	} {
		key, err := placeOrder(ctx, pool, o)
		if err != nil {
			return err
		}
		if o.commit {
			keys = append(keys, key)
		}
	}

	// One middleware around every job: the key, the epoch of the claim it runs under, the
	// attempt, and how it ended.
	logJobs := submitter.MiddlewareFunc(func(ctx context.Context, j submitter.Job, next func(context.Context) (batchclaim.Result, error)) (batchclaim.Result, error) {
		r, err := next(ctx)
		line := fmt.Sprintf("%s: %s attempt %d under epoch %d: %s", j.Claim.ServiceID, j.Batch.Kind, j.Batch.Attempts+1, j.Claim.Epoch, r.Verdict)
		if err != nil {
			line += " (" + err.Error() + ")"
		}
		out.say("%s", line)
		return r, err
	})
	finished := make(chan string, 16)
	n, err := node.New(pool, node.Config{
		Claims:      claims.Config{Name: "example", RenewInterval: 200 * time.Millisecond, Expiry1: 5 * time.Second},
		Submitter:   workers,
		Middleware:  []submitter.Middleware{logJobs},
		BackoffBase: 100 * time.Millisecond,
		Events: observer.Events{StatusChanged: func(t observer.Transition) {
			if t.To.Terminal() {
				finished <- t.BatchID
			}
		}},
	})
	if err != nil {
		return err
	}
	runCtx, stopNode := context.WithCancel(ctx)
	stopped := make(chan error, 1)
	go func() { stopped <- n.Run(runCtx) }()
	for range 3 { // the first order's charge and receipt, the second's charge
		select {
		case <-finished:
		case <-time.After(time.Minute):
			stopNode()
			<-stopped
			return errors.New("the jobs did not finish within a minute")
		case <-ctx.Done():
			stopNode()
			<-stopped
			return ctx.Err()
		}
	}
	stopNode()
	if err := <-stopped; err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return report(ctx, pool, keys, out)
}

// order is an order a customer places.
type order struct {
	email, network string
	cents          int
	commit         bool // false: the transaction rolls back
}

// placeOrder stores an order and its jobs in one transaction, committed or rolled back, and
// returns the order's key ("order-<id>").
func placeOrder(ctx context.Context, pool *pgxpool.Pool, o order) (string, error) {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return "", err
	}
	defer tx.Rollback(ctx) //nolint:errcheck // after a commit, a no-op
	var id int64
	if err := tx.QueryRow(ctx, `INSERT INTO shop_orders (email, cents) VALUES ($1, $2) RETURNING id`, o.email, o.cents).Scan(&id); err != nil {
		return "", err
	}
	key := fmt.Sprintf("order-%d", id)
	var opts []jobs.InsertOption
	if o.network == "slowpay" {
		opts = append(opts, jobs.Timeout(300*time.Millisecond), jobs.MaxAttempts(1))
	}
	// A job's id is unique within its key: inserting "charge" again would insert nothing.
	if _, err := jobs.Insert(ctx, tx, key, "charge", ChargeCard{Order: key, Cents: o.cents, Network: o.network}, opts...); err != nil {
		return "", err
	}
	if o.network != "slowpay" {
		if _, err := jobs.Insert(ctx, tx, key, "receipt", SendReceipt{Order: key, Email: o.email}); err != nil {
			return "", err
		}
	}
	if !o.commit {
		return key, tx.Rollback(ctx)
	}
	return key, tx.Commit(ctx)
}

// report prints the jobs of the orders as the database has them now.
func report(ctx context.Context, pool *pgxpool.Pool, keys []string, out *printer) error {
	rows, err := pool.Query(ctx, `SELECT service_id, kind, state, attempts, COALESCE(output::text, last_error, '')
		FROM batchclaim.batches WHERE service_id = ANY($1) ORDER BY seq`, keys)
	if err != nil {
		return err
	}
	defer rows.Close()
	out.say("\njobs:")
	for rows.Next() {
		var key, kind, state, note string
		var attempts int
		if err := rows.Scan(&key, &kind, &state, &attempts, &note); err != nil {
			return err
		}
		out.say("  %s %-12s %-9s after %d attempt(s)  %s", key, kind, state, attempts, note)
	}
	return rows.Err()
}
