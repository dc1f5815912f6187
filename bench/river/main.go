package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"os/signal"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// localURL is the server used when DATABASE_URL is not set.
const localURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

// result is the line printed, in the shape of `batchclaim bench --json`.
type result struct {
	Scenario      string  `json:"scenario"`
	JobsPerSecond float64 `json:"jobs_per_second"`
	Workers       int     `json:"workers"`
	Jobs          int     `json:"jobs"`
	Seconds       float64 `json:"seconds"`
}

type noopArgs struct{}

func (noopArgs) Kind() string { return "noop" }

type noopWorker struct {
	river.WorkerDefaults[noopArgs]
}

func (noopWorker) Work(context.Context, *river.Job[noopArgs]) error { return nil }

func main() {
	workers := flag.Int("workers", 100, "River workers (MaxWorkers of the default queue)")
	jobs := flag.Int("jobs", 10000, "no-op jobs stored before the client starts")
	timeout := flag.Duration("timeout", 10*time.Minute, "give up after this long")
	flag.Parse()
	if *workers < 1 || *jobs < 1 {
		fmt.Fprintln(os.Stderr, "river: --workers and --jobs must be at least 1")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	r, err := run(ctx, os.Getenv("DATABASE_URL"), *workers, *jobs)
	if err != nil {
		fmt.Fprintln(os.Stderr, "river:", err)
		os.Exit(1)
	}
	if err := json.NewEncoder(os.Stdout).Encode(r); err != nil {
		fmt.Fprintln(os.Stderr, "river:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, serverURL string, workers, jobs int) (result, error) {
	if serverURL == "" {
		serverURL = localURL
	}
	dbURL, drop, err := scratch(ctx, serverURL)
	if err != nil {
		return result{}, err
	}
	defer drop()
	cfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		return result{}, fmt.Errorf("database URL: %w", err)
	}
	// River's default pool sizing is the caller's business; give the workers room to finish
	// their jobs without queuing for a connection.
	cfg.MaxConns = int32(min(workers+10, 100))
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return result{}, fmt.Errorf("connect: %w", err)
	}
	defer pool.Close()
	driver := riverpgxv5.New(pool)
	migrator, err := rivermigrate.New(driver, nil)
	if err != nil {
		return result{}, err
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return result{}, fmt.Errorf("migrate river schema: %w", err)
	}
	w := river.NewWorkers()
	river.AddWorker(w, noopWorker{})
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	client, err := river.NewClient(driver, &river.Config{
		Queues:  map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: workers}},
		Workers: w,
		Logger:  logger,
	})
	if err != nil {
		return result{}, err
	}
	params := make([]river.InsertManyParams, jobs)
	for i := range params {
		params[i] = river.InsertManyParams{Args: noopArgs{}}
	}
	for len(params) > 0 {
		n := min(len(params), 5000)
		if _, err := client.InsertManyFast(ctx, params[:n]); err != nil {
			return result{}, fmt.Errorf("insert jobs: %w", err)
		}
		params = params[n:]
	}
	start := time.Now()
	if err := client.Start(ctx); err != nil {
		return result{}, err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_ = client.Stop(sctx)
	}()
	for {
		var done int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE state = 'completed'`).Scan(&done); err != nil {
			return result{}, fmt.Errorf("count completed jobs: %w", err)
		}
		if done >= jobs {
			break
		}
		select {
		case <-ctx.Done():
			return result{}, fmt.Errorf("%d of %d jobs completed: %w", done, jobs, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
	secs := time.Since(start).Seconds()
	return result{Scenario: "river", JobsPerSecond: float64(jobs) / secs, Workers: workers, Jobs: jobs, Seconds: secs}, nil
}

// scratch creates an empty database on the server and returns its URL and a function that
// drops it.
func scratch(ctx context.Context, serverURL string) (string, func(), error) {
	u, err := url.Parse(serverURL)
	if err != nil {
		return "", nil, fmt.Errorf("database URL: %w", err)
	}
	name := fmt.Sprintf("river_bench_%d_%d", os.Getpid(), time.Now().Unix()%100000)
	conn, err := pgx.Connect(ctx, serverURL)
	if err != nil {
		return "", nil, fmt.Errorf("connect: %w", err)
	}
	_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
	conn.Close(ctx)
	if err != nil {
		return "", nil, fmt.Errorf("create scratch database: %w", err)
	}
	drop := func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 20*time.Second)
		defer cancel()
		c, err := pgx.Connect(dctx, serverURL)
		if err != nil {
			fmt.Fprintln(os.Stderr, "river: drop scratch database:", err)
			return
		}
		defer c.Close(dctx)
		if _, err := c.Exec(dctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			fmt.Fprintln(os.Stderr, "river: drop scratch database:", errors.Unwrap(err))
		}
	}
	u.Path = "/" + name
	return u.String(), drop, nil
}
