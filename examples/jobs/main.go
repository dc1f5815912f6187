package main

import (
	"context"
	"encoding/json"
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
	"github.com/batchclaim/batchclaim/ingest"
	"github.com/batchclaim/batchclaim/jobs"
	"github.com/batchclaim/batchclaim/migrations"
	"github.com/batchclaim/batchclaim/node"
	"github.com/batchclaim/batchclaim/observer"
	"github.com/batchclaim/batchclaim/periodic"
	"github.com/batchclaim/batchclaim/pgdb"
	"github.com/batchclaim/batchclaim/submitter"
)

// ChargeCard charges an order's card. Its kind has a timeout of its own (chargeWorker.Timeout).
type ChargeCard struct {
	Order   string `json:"order"`
	Cents   int    `json:"cents"`
	Network string `json:"network"` // how the card network answers: see chargeWorker
}

func (ChargeCard) Kind() string { return "charge_card" }

// SendReceipt mails the receipt of a paid order and records the receipt's id as its output.
type SendReceipt struct {
	Order string `json:"order"`
	Email string `json:"email"`
}

func (SendReceipt) Kind() string { return "send_receipt" }

// SalesReport counts the orders; a periodic job stores one every second.
type SalesReport struct{}

func (SalesReport) Kind() string { return "sales_report" }

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

// chargeWorker charges cards. How the card network answers depends on the order:
//
//   - visa: at once;
//   - 3ds: "ask again shortly" (3-D Secure pending) at first: the job snoozes, which runs it
//     again soon without spending an attempt;
//   - slowpay: never; the job's own timeout (set at insert) ends it;
//   - slowbank: only after the customer has long gone; the order is cancelled while the job
//     runs, which ends the job's context.
type chargeWorker struct {
	out     *printer
	running chan<- string // the orders whose charge on slowbank has started
}

func (w chargeWorker) Timeout(*jobs.Job[ChargeCard]) time.Duration { return 30 * time.Second }

func (w chargeWorker) Work(ctx context.Context, j *jobs.Job[ChargeCard]) error {
	switch j.Args.Network {
	case "3ds":
		if j.Attempt() == 1 {
			return batchclaim.SnoozeFor(200 * time.Millisecond)
		}
	case "slowpay":
		<-ctx.Done()
		return fmt.Errorf("card network: %w", ctx.Err())
	case "slowbank":
		select {
		case w.running <- j.Args.Order:
		case <-ctx.Done():
		}
		<-ctx.Done()
		if batchclaim.Cancelled(ctx) {
			w.out.say("%s: charge stopped: %v", j.Args.Order, context.Cause(ctx))
		}
		return ctx.Err()
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

	// Three kinds, one worker each.
	running := make(chan string, 1)
	workers := jobs.NewWorkers()
	jobs.AddWorker[ChargeCard](workers, chargeWorker{out: out, running: running})
	jobs.AddWorker(workers, jobs.WorkFunc(func(ctx context.Context, j *jobs.Job[SendReceipt]) error {
		if j.Attempt() == 1 {
			return errors.New("mail server busy") // retried after a backoff, before the key's next job
		}
		out.say("%s: receipt mailed to %s", j.Args.Order, j.Args.Email)
		return jobs.RecordOutput(ctx, map[string]string{"receipt": "R-" + strings.TrimPrefix(j.Args.Order, "order-")})
	}))
	reports := make(chan struct{}, 1)
	jobs.AddWorker(workers, jobs.WorkFunc(func(ctx context.Context, j *jobs.Job[SalesReport]) error {
		var orders int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM shop_orders`).Scan(&orders); err != nil {
			return err
		}
		select {
		case reports <- struct{}{}:
		default:
		}
		return jobs.RecordOutput(ctx, map[string]int{"orders": orders})
	}))

	// Orders and their jobs, each order in one transaction: the order is stored with its
	// jobs or not at all. The jobs of one order (the key) run one at a time, in this order.
	var keys []string
	var slowbank jobs.Stored
	for _, o := range []order{
		{email: "ann@example.com", cents: 1250, network: "visa", commit: true},
		{email: "bo@example.com", cents: 990, network: "slowpay", commit: true},
		{email: "cy@example.com", cents: 500, network: "visa", commit: false}, // rolled back: no order, no job
		{email: "di@example.com", cents: 4200, network: "3ds", commit: true},
		{email: "ed@example.com", cents: 15000, network: "slowbank", commit: true},
	} {
		key, charge, err := placeOrder(ctx, pool, o)
		if err != nil {
			return err
		}
		if o.commit {
			keys = append(keys, key)
		}
		if o.network == "slowbank" {
			slowbank = charge
		}
	}

	// One middleware around every job: the key, the epoch of the claim it runs under, the
	// attempt, and how it ended.
	logJobs := submitter.MiddlewareFunc(func(ctx context.Context, j submitter.Job, next func(context.Context) (batchclaim.Result, error)) (batchclaim.Result, error) {
		r, err := next(ctx)
		if j.Batch.Kind == (SalesReport{}).Kind() {
			return r, err // every second: not logged
		}
		verdict := r.Verdict.String()
		if batchclaim.Cancelled(ctx) { // its outcome will make it CANCELLED
			verdict = "cancelled"
		}
		line := fmt.Sprintf("%s: %s attempt %d under epoch %d: %s", j.Claim.ServiceID, j.Batch.Kind, j.Batch.Attempts+1, j.Claim.Epoch, verdict)
		if err != nil {
			line += " (" + err.Error() + ")"
		}
		out.say("%s", line)
		return r, err
	})
	// A sales report every second, stored once per tick whatever the number of instances.
	report, err := json.Marshal(SalesReport{})
	if err != nil {
		return err
	}
	finished := make(chan string, 64)
	db, err := pgdb.Open(pool, "") // the default schema
	if err != nil {
		return err
	}
	n, err := node.New(db, node.Config{
		Claims:      claims.Config{Name: "example", RenewInterval: 200 * time.Millisecond, Expiry1: 5 * time.Second},
		Submitter:   workers,
		Middleware:  []submitter.Middleware{logJobs},
		BackoffBase: 100 * time.Millisecond,
		Periodic: []periodic.Job{{Name: "sales-report", Schedule: periodic.Every(time.Second), ServiceID: "reports",
			Payload: report, Options: []ingest.EnqueueOption{ingest.Kind(SalesReport{}.Kind())}}},
		Events: observer.Events{StatusChanged: func(t observer.Transition) {
			if t.To.Terminal() && strings.HasPrefix(t.ServiceID, "order-") {
				finished <- t.ServiceID + " " + t.BatchID
			}
		}},
	})
	if err != nil {
		return err
	}
	runCtx, stopNode := context.WithCancel(ctx)
	stopped := make(chan error, 1)
	go func() { stopped <- n.Run(runCtx) }()
	stop := func(err error) error {
		stopNode()
		if serr := <-stopped; serr != nil && !errors.Is(serr, context.Canceled) && err == nil {
			err = serr
		}
		return err
	}

	// The customer of the slowbank order gives up while its charge runs: cancel the job. The
	// instance running it is told (NOTIFY), its context ends, and it becomes CANCELLED.
	timeout := time.After(time.Minute)
	select {
	case order := <-running:
		ch, err := node.Cancel(ctx, pool, slowbank.Seq, "the customer cancelled the order")
		if err != nil {
			return stop(err)
		}
		out.say("%s: cancel requested while the charge runs (%s, cancel requested: %v)", order, ch.From, ch.CancelRequested)
	case <-timeout:
		return stop(errors.New("the slowbank charge did not start within a minute"))
	}
	// Wait for the orders' six jobs and a sales report.
	for want, gotReport := 6, false; want > 0 || !gotReport; {
		select {
		case <-finished:
			want--
		case <-reports:
			gotReport = true
		case <-timeout:
			return stop(errors.New("the jobs did not finish within a minute"))
		case <-ctx.Done():
			return stop(ctx.Err())
		}
	}
	if err := stop(nil); err != nil {
		return err
	}
	return printReport(ctx, pool, keys, out)
}

// order is an order a customer places.
type order struct {
	email, network string
	cents          int
	commit         bool // false: the transaction rolls back
}

// placeOrder stores an order and its jobs in one transaction, committed or rolled back, and
// returns the order's key ("order-<id>") and its charge job.
func placeOrder(ctx context.Context, pool *pgxpool.Pool, o order) (string, jobs.Stored, error) {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return "", jobs.Stored{}, err
	}
	defer tx.Rollback(ctx) //nolint:errcheck // after a commit, a no-op
	var id int64
	if err := tx.QueryRow(ctx, `INSERT INTO shop_orders (email, cents) VALUES ($1, $2) RETURNING id`, o.email, o.cents).Scan(&id); err != nil {
		return "", jobs.Stored{}, err
	}
	key := fmt.Sprintf("order-%d", id)
	var opts []jobs.InsertOption
	if o.network == "slowpay" {
		opts = append(opts, jobs.Timeout(300*time.Millisecond), jobs.MaxAttempts(1))
	}
	// A job's id is unique within its key: inserting "charge" again would insert nothing.
	charge, err := jobs.Insert(ctx, tx, key, "charge", ChargeCard{Order: key, Cents: o.cents, Network: o.network}, opts...)
	if err != nil {
		return "", jobs.Stored{}, err
	}
	if o.network == "visa" || o.network == "3ds" {
		if _, err := jobs.Insert(ctx, tx, key, "receipt", SendReceipt{Order: key, Email: o.email}); err != nil {
			return "", jobs.Stored{}, err
		}
	}
	if !o.commit {
		return key, charge, tx.Rollback(ctx)
	}
	return key, charge, tx.Commit(ctx)
}

// printReport prints the jobs of the orders as the database has them now, and the latest
// sales report.
func printReport(ctx context.Context, pool *pgxpool.Pool, keys []string, out *printer) error {
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
	if err := rows.Err(); err != nil {
		return err
	}
	var id, state, output string
	if err := pool.QueryRow(ctx, `SELECT batch_id, state, COALESCE(output::text, '') FROM batchclaim.batches
		WHERE service_id = 'reports' AND kind = 'sales_report' AND state = 'COMMITTED' ORDER BY seq DESC LIMIT 1`).Scan(&id, &state, &output); err != nil {
		return fmt.Errorf("the latest sales report: %w", err)
	}
	out.say("\nperiodic: %s %s  %s", id[:len("periodic/sales-report/")]+"<tick>", state, output)
	return nil
}
