package demo

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batchclaim/batchclaim/cmd/batchclaim/internal/cli"
	"github.com/batchclaim/batchclaim/cmd/batchclaim/internal/database"
	"github.com/batchclaim/batchclaim/cmd/batchclaim/internal/subproc"
	"github.com/batchclaim/batchclaim/dlt"
	"github.com/batchclaim/batchclaim/dlt/dltsim"
	"github.com/batchclaim/batchclaim/ingest"
	"github.com/batchclaim/batchclaim/inspect"
	"github.com/batchclaim/batchclaim/testkit/history"
)

// Timings of the demo's instances: R = 200ms, T1 = 1.5s (D = 1s), T2 = 6s.
const (
	demoRenew   = 200 * time.Millisecond
	demoExpiry1 = 1500 * time.Millisecond
	demoExpiry2 = 6 * time.Second
)

// demoUnreachableLimit is how long the live table rides through an unreachable database
// (a failover, a restart) before the demo gives up.
const demoUnreachableLimit = 2 * time.Minute

// demoRun is the state of one pipeline demo.
type demoRun struct {
	cfg     demoConfig
	out     io.Writer
	pool    *pgxpool.Pool
	sim     *dltsim.Sim
	simURL  string
	logDir  string
	kids    []*demoKid
	faults  []string
	start   time.Time
	victims map[string]victim // instance name -> who and when (database time) it failed
}

type victim struct {
	id uuid.UUID
	at time.Time
}

type demoKid struct {
	*subproc.Child
	metricsURL string
	stale      int // last scraped batchclaim_stale_writes_rejected_total
	state      string
}

func demoPipeline(ctx context.Context, c demoConfig, out io.Writer) (Summary, error) {
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	scratch, err := database.NewScratch(ctx, "batchclaim_demo", c.keep, out, logger)
	if err != nil {
		return Summary{}, err
	}
	defer scratch.Close(ctx)
	pool, err := database.Open(ctx, scratch.URL, 4)
	if err != nil {
		return Summary{}, err
	}
	defer pool.Close()
	d := &demoRun{cfg: c, out: out, pool: pool, victims: map[string]victim{}}
	if err := d.startLedger(); err != nil {
		return Summary{}, err
	}
	defer d.sim.Close()
	if err := d.enqueue(ctx); err != nil {
		return Summary{}, err
	}
	if d.logDir, err = os.MkdirTemp("", "batchclaim-demo-"); err != nil {
		return Summary{}, err
	}
	fmt.Fprintf(out, "%s ledger simulator at %s; %d instances; %d service_ids x %d batches; R=%s T1=%s T2=%s; logs in %s\n\n",
		c.flavor, d.simURL, c.instances, c.serviceIDs, c.batches, demoRenew, demoExpiry1, demoExpiry2, d.logDir)
	defer func() {
		for _, k := range d.kids {
			k.Stop(10 * time.Second)
		}
	}()
	if err := d.startInstances(scratch.URL); err != nil {
		return Summary{}, err
	}
	d.start = time.Now()
	if err := d.watch(ctx); err != nil {
		return Summary{}, err
	}
	for _, k := range d.kids {
		d.scrape(k)
		k.Stop(10 * time.Second)
	}
	var sum Summary
	err = history.Retry(ctx, demoUnreachableLimit, func(ctx context.Context) error {
		var err error
		sum, err = d.summarize(ctx)
		return err
	})
	sum.Database = scratch.Source.Kind
	return sum, err
}

func (d *demoRun) startLedger() error {
	// A ledger that takes a while to commit, so that the faults hit work in progress.
	sim, err := dltsim.New(dltsim.Config{Flavor: d.cfg.flavor, CommitLatency: 600 * time.Millisecond, Seed: 1})
	if err != nil {
		return err
	}
	base, err := sim.Start("127.0.0.1:0")
	if err != nil {
		return err
	}
	d.sim, d.simURL = sim, base
	// Faults from the ledger from the start: a few 503s, and responses lost after the batch
	// was accepted (the instance cannot know the outcome).
	sim.InjectStatus(http.StatusServiceUnavailable, 5)
	sim.InjectDroppedResponses(3)
	d.faults = append(d.faults, "ledger: 5 x 503, 3 responses dropped after acceptance")
	return nil
}

func (d *demoRun) enqueue(ctx context.Context) error {
	tx, err := d.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	for n := range d.cfg.batches {
		for s := range d.cfg.serviceIDs {
			svc := fmt.Sprintf("service-%04d", s)
			id, list := dlt.FakeBatch(svc, n)
			if _, err := ingest.Enqueue(ctx, tx, svc, id, list); err != nil {
				return err
			}
		}
	}
	return tx.Commit(ctx)
}

func (d *demoRun) startInstances(dbURL string) error {
	for i := 1; i <= d.cfg.instances; i++ {
		name := fmt.Sprintf("instance-%d", i)
		addr, err := subproc.FreeAddr()
		if err != nil {
			return err
		}
		args := []string{"run", "--database-url", dbURL, "--dlt-url", d.simURL, "--dlt-flavor", string(d.cfg.flavor),
			"--instance-name", name, "--listen", addr, "--log-level", "info",
			"--renew-interval", demoRenew.String(), "--expiry-1", demoExpiry1.String(), "--expiry-2", demoExpiry2.String(),
			"--poll-interval", "200ms", "--unknown-answers", "3", "--unknown-grace", "5s", "--workers", "8",
			"--backoff-base", "50ms", "--backoff-max", "1s"}
		if d.cfg.flavor == dlt.FlavorScabbard {
			args = append(args, "--scabbard-circuit", "circuit0", "--scabbard-service", "service0")
		}
		k, err := subproc.Start(name, filepath.Join(d.logDir, name+".log"), args...)
		if err != nil {
			return err
		}
		d.kids = append(d.kids, &demoKid{Child: k, metricsURL: "http://" + addr + "/metrics", state: "running"})
	}
	return nil
}

// watch prints the live table each second, injects the faults as the work progresses, and
// returns when every batch is terminal or the timeout passed.
func (d *demoRun) watch(ctx context.Context) error {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var stoppedAt, resumedAt, unreachable time.Time
	restarted := false
	total := d.cfg.serviceIDs * d.cfg.batches
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
		for _, k := range d.kids {
			if k.state == "running" {
				d.scrape(k)
				if k.Exited() {
					return fmt.Errorf("%s exited unexpectedly (%v); see %s", k.Name, k.Err, d.logDir)
				}
			}
		}
		done, err := d.progress(ctx, total)
		if err != nil {
			// A failover or restart of the database: the instances ride through it, and so
			// does the table, for a while.
			if unreachable.IsZero() {
				unreachable = time.Now()
			}
			if time.Since(unreachable) > demoUnreachableLimit {
				return fmt.Errorf("database unreachable for %v: %w", demoUnreachableLimit, err)
			}
			fmt.Fprintf(d.out, "t=%4.0fs  database unreachable (%v); trying again\n", time.Since(d.start).Seconds(), cli.OneLine(err))
			continue
		}
		unreachable = time.Time{}
		frac := float64(done) / float64(total)
		stopped := len(d.kids) >= 3 && d.kids[1].state == "stopped"
		switch {
		case done == total && !stopped && time.Since(resumedAt) > 2*time.Second:
			fmt.Fprintf(d.out, "\nevery batch is finished after %.1fs\n", time.Since(d.start).Seconds())
			return nil
		case time.Since(d.start) > d.cfg.timeout:
			fmt.Fprintf(d.out, "\ngave up after %s with %d of %d batches finished\n", d.cfg.timeout, done, total)
			return nil
		case frac >= 0.2 && d.kids[0].state == "running":
			d.fault(ctx, d.kids[0], syscall.SIGKILL, "killed", "SIGKILL")
		case frac >= 0.35 && len(d.kids) >= 3 && d.kids[1].state == "running" && stoppedAt.IsZero():
			d.fault(ctx, d.kids[1], syscall.SIGSTOP, "stopped", "SIGSTOP (resumed after expiry-2)")
			stoppedAt = time.Now()
		case d.kids[1].state == "stopped" && time.Since(stoppedAt) > demoExpiry2+1500*time.Millisecond:
			_ = d.kids[1].Signal(syscall.SIGCONT)
			d.kids[1].state = "running"
			resumedAt = time.Now()
			fmt.Fprintf(d.out, ">>> SIGCONT %s after %.1fs: its claims were taken; it must find its epochs stale\n",
				d.kids[1].Name, time.Since(stoppedAt).Seconds())
		case frac >= 0.55 && !restarted:
			d.sim.Restart()
			restarted = true
			d.faults = append(d.faults, "ledger restarted: pending batches forgotten (UNKNOWN)")
			fmt.Fprintf(d.out, ">>> ledger restart: it forgets every batch not yet committed\n")
		}
	}
}

func (d *demoRun) fault(ctx context.Context, k *demoKid, sig syscall.Signal, state, what string) {
	at, err := inspect.Now(ctx, d.pool)
	if err != nil {
		at = time.Now()
	}
	var id uuid.UUID
	if rows, err := inspect.Instances(ctx, d.pool); err == nil {
		for _, r := range rows {
			if r.Name == k.Name {
				id = r.ID
			}
		}
	}
	_ = k.Signal(sig)
	k.state = state
	d.victims[k.Name] = victim{id: id, at: at}
	d.faults = append(d.faults, fmt.Sprintf("%s %s at %.1fs", what, k.Name, time.Since(d.start).Seconds()))
	fmt.Fprintf(d.out, ">>> %s %s\n", what, k.Name)
}

// progress prints one line of the live table and returns the number of finished batches.
func (d *demoRun) progress(ctx context.Context, total int) (int, error) {
	rows, err := inspect.Instances(ctx, d.pool)
	if err != nil {
		return 0, err
	}
	totals, err := inspect.Totals(ctx, d.pool)
	if err != nil {
		return 0, err
	}
	finished := int(totals.Finished())
	state := map[string]string{}
	for _, k := range d.kids {
		state[k.Name] = k.state
	}
	var cells []string
	for _, r := range rows {
		mark := ""
		if s := state[r.Name]; s != "running" && s != "" {
			mark = " [" + s + "]"
		}
		cells = append(cells, fmt.Sprintf("%s%s %3d claims %2d in flight %4d committed", r.Name, mark, r.Claims, r.InFlight, r.Committed))
	}
	sort.Strings(cells)
	fmt.Fprintf(d.out, "t=%4.0fs  %s  | finished %d/%d\n", time.Since(d.start).Seconds(), strings.Join(cells, " | "), finished, total)
	return finished, nil
}

// scrape reads an instance's stale-write counter from its /metrics.
func (d *demoRun) scrape(k *demoKid) {
	c := http.Client{Timeout: 500 * time.Millisecond}
	resp, err := c.Get(k.metricsURL)
	if err != nil {
		return
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "batchclaim_stale_writes_rejected_total "); ok {
			if n, err := strconv.ParseFloat(v, 64); err == nil {
				k.stale = int(n)
			}
		}
	}
}
