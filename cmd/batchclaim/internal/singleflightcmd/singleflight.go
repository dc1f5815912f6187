package singleflightcmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batchclaim/batchclaim/cmd/batchclaim/internal/cli"
	"github.com/batchclaim/batchclaim/cmd/batchclaim/internal/database"
	"github.com/batchclaim/batchclaim/cmd/batchclaim/internal/redact"
	"github.com/batchclaim/batchclaim/cmd/batchclaim/internal/subproc"
	"github.com/batchclaim/batchclaim/migrations"
	"github.com/batchclaim/batchclaim/pgdb"
)

// Command is `batchclaim singleflight demo` (and the demo's hidden worker).
func Command(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		switch args[0] {
		case "demo":
			return sfDemo(ctx, args[1:], stdout, stderr)
		case "worker": // started by the demo, not for people
			return sfWorker(ctx, args[1:], stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "Usage: batchclaim singleflight demo [flags]\n\n"+
		"  demo  several processes Get the same keys from a shared cache whose source is slow; one\n"+
		"        fetcher is SIGKILLed mid-fetch and a waiter takes its lease over. Checks from the\n"+
		"        database's record that no key was ever fetched twice at once, that every Get got\n"+
		"        an answer and that no stored value was replaced by one of an older fetch epoch.\n")
	if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
		return nil
	}
	return cli.ErrUsage
}

// sfDemoConfig shapes `batchclaim singleflight demo`.
type sfDemoConfig struct {
	processes, keys, callers int
	duration, fetchTime      time.Duration
	ttl, lease               time.Duration
	asJSON, keep             bool
	schema                   string
}

// sfSummary is what `singleflight demo --json` prints. The first three are the invariants:
// all 0 in a clean run.
type sfSummary struct {
	ParallelFetches     int      `json:"parallel_fetches"`
	LostResults         int      `json:"lost_results"`
	StaleOverwrites     int      `json:"stale_overwrites"`
	EpochsReused        int      `json:"epochs_reused"`
	Gets                int64    `json:"gets"`
	StaleServed         int64    `json:"stale_served"`
	Fetches             int      `json:"fetches"`
	ValueWrites         int      `json:"value_writes"`
	Takeovers           int64    `json:"takeovers"`
	NotifyWakeups       int64    `json:"notify_wakeups"`
	PollWakeups         int64    `json:"poll_wakeups"`
	KilledWorker        string   `json:"killed_worker"`
	KilledEpoch         int64    `json:"killed_epoch"`
	TakeoverEpoch       int64    `json:"takeover_epoch"`
	TakeoverSeconds     float64  `json:"takeover_seconds"`
	WaitersOfKilledKey  int      `json:"waiters_of_killed_key"`
	Processes           int      `json:"processes"`
	Keys                int      `json:"keys"`
	LeaseSeconds        float64  `json:"lease_seconds"`
	TTLSeconds          float64  `json:"ttl_seconds"`
	FetchSeconds        float64  `json:"fetch_seconds"`
	DurationSeconds     float64  `json:"duration_seconds"`
	Database            string   `json:"database"`
	ParallelFetchDetail []string `json:"parallel_fetch_detail,omitempty"`
}

// sfVictimKey is the key whose fetch blocks in the first worker until it is killed.
const sfVictimKey = "slow-key"

func sfDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("singleflight demo", "[flags]",
		"Per-key single-flight on a throwaway database (DATABASE_URL if set, else a throwaway\n"+
			"cluster from local PostgreSQL binaries, else a Docker container). Starts --processes\n"+
			"workers (this binary, separate OS processes) whose callers Get the same keys; the\n"+
			"source is slow and records every call (start, end, fetch epoch) in the database. The\n"+
			"first worker's fetch of \""+sfVictimKey+"\" blocks; once every other worker waits for it,\n"+
			"that worker is SIGKILLed and a waiter must take the lease over. Exits non-zero unless\n"+
			"parallel_fetches, lost_results and stale_overwrites are all 0 and the takeover happened.", stderr)
	var c sfDemoConfig
	fs.IntVar(&c.processes, "processes", 4, "worker processes (at least 2)")
	fs.IntVar(&c.keys, "keys", 6, "keys besides "+sfVictimKey)
	fs.IntVar(&c.callers, "callers", 3, "concurrent callers of Get per worker")
	fs.DurationVar(&c.duration, "duration", 15*time.Second, "how long each surviving worker keeps calling Get")
	fs.DurationVar(&c.fetchTime, "fetch-time", 300*time.Millisecond, "how long one source call takes")
	fs.DurationVar(&c.ttl, "ttl", 2*time.Second, "how long a fetched value is fresh")
	fs.DurationVar(&c.lease, "lease", 1500*time.Millisecond, "fetch lease (a waiter takes over this long after the fetcher's last renewal)")
	fs.BoolVar(&c.asJSON, "json", false, "print the summary as one JSON object on stdout (progress goes to stderr)")
	fs.BoolVar(&c.keep, "keep", false, "keep the scratch database (and cluster) afterwards")
	schema := database.SchemaFlag(fs)
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	c.schema = *schema
	if err := pgdb.ValidateSchema(c.schema); err != nil {
		return fmt.Errorf("--schema: %w", err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if c.processes < 2 || c.keys < 1 || c.callers < 1 || c.duration <= 0 {
		return fmt.Errorf("--processes must be at least 2, --keys and --callers at least 1, --duration positive")
	}
	out := stdout
	if c.asJSON {
		out = stderr
	}
	sum, err := sfRunDemo(ctx, c, out)
	if err != nil {
		return err
	}
	if err := cli.WriteSummary(stdout, c.asJSON, sum, sum.print); err != nil {
		return err
	}
	if sum.ParallelFetches > 0 || sum.LostResults > 0 || sum.StaleOverwrites > 0 || sum.EpochsReused > 0 {
		return cli.ExitError{Code: 1, Msg: fmt.Sprintf("invariant violated: parallel_fetches=%d lost_results=%d stale_overwrites=%d epochs_reused=%d",
			sum.ParallelFetches, sum.LostResults, sum.StaleOverwrites, sum.EpochsReused)}
	}
	if sum.TakeoverEpoch == 0 {
		return cli.ExitError{Code: 1, Msg: "no waiter took over the killed fetcher's lease"}
	}
	return nil
}

func sfRunDemo(ctx context.Context, c sfDemoConfig, out io.Writer) (sfSummary, error) {
	start := time.Now()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	sdb, err := database.NewScratch(ctx, "batchclaim_sf", c.keep, out, logger, migrations.InSchema(c.schema))
	if err != nil {
		return sfSummary{}, err
	}
	defer sdb.Close(ctx)
	pool, err := database.Open(ctx, sdb.URL, 4)
	if err != nil {
		return sfSummary{}, err
	}
	defer pool.Close()
	// The demo's tables go to the connection's search_path; the trigger on the cache's table
	// to batchclaim's schema.
	if _, err := pgdb.InSchema(pool, c.schema).Exec(ctx, sfDemoSchema); err != nil {
		return sfSummary{}, fmt.Errorf("create the demo's record tables: %w", err)
	}
	logDir, err := os.MkdirTemp("", "batchclaim-singleflight-")
	if err != nil {
		return sfSummary{}, err
	}
	fmt.Fprintf(out, "%d workers x %d callers, %d keys + %q; source takes %s, TTL %s, fetch lease %s; logs in %s\n",
		c.processes, c.callers, c.keys, sfVictimKey, c.fetchTime, c.ttl, c.lease, logDir)

	kids := map[string]*subproc.Child{}
	defer func() {
		for _, k := range kids {
			k.Stop(5 * time.Second)
		}
	}()
	startWorker := func(name string, hang bool) error {
		args := []string{"singleflight", "worker", "--database-url", sdb.URL, "--name", name,
			"--keys", strconv.Itoa(c.keys), "--callers", strconv.Itoa(c.callers), "--duration", c.duration.String(),
			"--fetch-time", c.fetchTime.String(), "--ttl", c.ttl.String(), "--lease", c.lease.String(), "--schema", c.schema}
		if hang {
			args = append(args, "--hang-key", sfVictimKey)
		}
		k, err := subproc.Start(name, filepath.Join(logDir, name+".log"), args...)
		if err != nil {
			return err
		}
		kids[name] = k
		return nil
	}

	// 1. The victim starts alone, so that it is the one that wins the slow key's lease.
	victim := "worker-1"
	if err := startWorker(victim, true); err != nil {
		return sfSummary{}, err
	}
	var killedEpoch int64
	err = sfPoll(ctx, time.Minute, "the first worker to start fetching "+sfVictimKey, kids, func() (bool, error) {
		err := pool.QueryRow(ctx, `SELECT COALESCE(max(epoch), 0) FROM sf_demo_calls WHERE worker = $1 AND key = $2`,
			victim, sfVictimKey).Scan(&killedEpoch)
		return killedEpoch > 0, err
	})
	if err != nil {
		return sfSummary{}, fmt.Errorf("%w (logs in %s)", err, logDir)
	}
	fmt.Fprintf(out, "%s fetches %q with epoch %d; its source will not return\n", victim, sfVictimKey, killedEpoch)

	// 2. The others start; each one's first Get is the slow key, which waits.
	for i := 2; i <= c.processes; i++ {
		if err := startWorker(fmt.Sprintf("worker-%d", i), false); err != nil {
			return sfSummary{}, err
		}
	}
	err = sfPoll(ctx, time.Minute, "every other worker to wait for "+sfVictimKey, kids, func() (bool, error) {
		var n int
		err := pool.QueryRow(ctx, `SELECT count(*) FROM sf_demo_workers WHERE name <> $1 AND victim_pending`, victim).Scan(&n)
		return n == c.processes-1, err
	})
	if err != nil {
		return sfSummary{}, fmt.Errorf("%w (logs in %s)", err, logDir)
	}

	// 3. SIGKILL the fetcher mid-fetch. Its source calls end when it is dead.
	if err := kids[victim].Signal(syscall.SIGKILL); err != nil {
		return sfSummary{}, err
	}
	<-kids[victim].Done()
	var killedAt time.Time
	if err := pool.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&killedAt); err != nil {
		return sfSummary{}, err
	}
	fmt.Fprintf(out, ">>> SIGKILL %s mid-fetch; %d workers wait for %q\n", victim, c.processes-1, sfVictimKey)

	// 4. The survivors run for --duration and stop on their own.
	for name, k := range kids {
		if name == victim {
			continue
		}
		select {
		case <-ctx.Done():
			return sfSummary{}, ctx.Err()
		case <-k.Done():
		case <-time.After(c.duration + 2*time.Minute):
			return sfSummary{}, fmt.Errorf("%s did not finish; see %s", name, logDir)
		}
		if k.Err != nil {
			return sfSummary{}, fmt.Errorf("%s failed (%v); see %s", name, k.Err, filepath.Join(logDir, name+".log"))
		}
	}
	sum, err := sfCheck(ctx, pool, victim, killedAt, killedEpoch)
	if err != nil {
		return sfSummary{}, err
	}
	sum.Processes, sum.Keys, sum.Database = c.processes, c.keys+1, redact.URL(sdb.URL)
	sum.LeaseSeconds, sum.TTLSeconds, sum.FetchSeconds = c.lease.Seconds(), c.ttl.Seconds(), c.fetchTime.Seconds()
	sum.DurationSeconds = time.Since(start).Seconds()
	return sum, nil
}

// sfPoll polls cond every 100ms until it holds, a worker exits, or timeout passes.
func sfPoll(ctx context.Context, timeout time.Duration, what string, kids map[string]*subproc.Child, cond func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, err := cond()
		if err != nil || ok {
			return err
		}
		for name, k := range kids {
			if k.Exited() {
				return fmt.Errorf("%s exited (%v) while waiting for %s", name, k.Err, what)
			}
		}
		if time.Now().After(deadline) {
			return errors.New("timed out waiting for " + what)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// sfCheck reads the record and counts violations, all by the database clock.
func sfCheck(ctx context.Context, pool *pgxpool.Pool, victim string, killedAt time.Time, killedEpoch int64) (sfSummary, error) {
	var s sfSummary
	s.KilledWorker, s.KilledEpoch = victim, killedEpoch
	// A call's interval runs from its start to its recorded end, or to the kill for the
	// killed worker's calls, or forever for a call that never ended in a live worker.
	rows, err := pool.Query(ctx, `
		WITH calls AS (
			SELECT id, worker, key, epoch, started_at,
			       COALESCE(ended_at, CASE WHEN worker = $1 THEN $2::timestamptz ELSE 'infinity' END) AS ended
			FROM sf_demo_calls)
		SELECT a.key, a.worker, a.epoch, b.worker, b.epoch
		FROM calls a JOIN calls b ON a.key = b.key AND a.id < b.id
		WHERE a.started_at < b.ended AND b.started_at < a.ended
		ORDER BY a.key, a.id`, victim, killedAt)
	if err != nil {
		return s, err
	}
	defer rows.Close()
	for rows.Next() {
		var key, wa, wb string
		var ea, eb int64
		if err := rows.Scan(&key, &wa, &ea, &wb, &eb); err != nil {
			return s, err
		}
		s.ParallelFetches++
		s.ParallelFetchDetail = append(s.ParallelFetchDetail, fmt.Sprintf("%s: %s epoch %d and %s epoch %d", key, wa, ea, wb, eb))
	}
	if err := rows.Err(); err != nil {
		return s, err
	}
	var takeoverAt *time.Time
	err = pool.QueryRow(ctx, `
		SELECT (SELECT count(*) FROM sf_demo_calls),
		       (SELECT count(*) FROM (SELECT key, epoch FROM sf_demo_calls GROUP BY key, epoch HAVING count(*) > 1) d),
		       (SELECT count(*) FROM sf_demo_writes),
		       (SELECT count(*) FROM sf_demo_writes WHERE old_epoch IS NOT NULL AND (new_epoch IS NULL OR new_epoch < old_epoch)),
		       (SELECT COALESCE(min(epoch), 0) FROM sf_demo_calls WHERE key = $1 AND epoch > $2),
		       (SELECT min(started_at) FROM sf_demo_calls WHERE key = $1 AND epoch > $2)`,
		sfVictimKey, killedEpoch).Scan(&s.Fetches, &s.EpochsReused, &s.ValueWrites, &s.StaleOverwrites, &s.TakeoverEpoch, &takeoverAt)
	if err != nil {
		return s, err
	}
	if takeoverAt != nil {
		s.TakeoverSeconds = takeoverAt.Sub(killedAt).Seconds()
	}
	// Lost: every Get of a surviving worker that failed or timed out, and every survivor that
	// did not report its end (its callers' outcomes are unknown).
	rows, err = pool.Query(ctx, `SELECT name, done, gets, errors, stale, takeovers, notify_wakeups, poll_wakeups, victim_epoch
		FROM sf_demo_workers WHERE name <> $1`, victim)
	if err != nil {
		return s, err
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		var done bool
		var gets, errs, stale, takeovers, notify, poll, victimEpoch int64
		if err := rows.Scan(&name, &done, &gets, &errs, &stale, &takeovers, &notify, &poll, &victimEpoch); err != nil {
			return s, err
		}
		if !done {
			errs++
		}
		s.LostResults += int(errs)
		s.Gets += gets
		s.StaleServed += stale
		s.Takeovers += takeovers
		s.NotifyWakeups += notify
		s.PollWakeups += poll
		if victimEpoch > killedEpoch {
			s.WaitersOfKilledKey++
		}
	}
	return s, rows.Err()
}

func (s sfSummary) print(w io.Writer) {
	fmt.Fprintf(w, "\nsummary (%d workers, %d keys, database: %s)\n", s.Processes, s.Keys, s.Database)
	fmt.Fprintf(w, "  fault:              SIGKILL %s while it fetched %q (epoch %d)\n", s.KilledWorker, sfVictimKey, s.KilledEpoch)
	fmt.Fprintf(w, "  takeover:           epoch %d began %.1fs after the kill (lease %.1fs); %d workers waiting got its value\n",
		s.TakeoverEpoch, s.TakeoverSeconds, s.LeaseSeconds, s.WaitersOfKilledKey)
	fmt.Fprintf(w, "  gets:               %d (%d stale at once), source calls %d, values stored %d\n", s.Gets, s.StaleServed, s.Fetches, s.ValueWrites)
	fmt.Fprintf(w, "  wake-ups:           %d by notification, %d by poll or lease expiry\n", s.NotifyWakeups, s.PollWakeups)
	fmt.Fprintf(w, "  parallel fetches:   %d (two source calls of one key at once)\n", s.ParallelFetches)
	for _, d := range s.ParallelFetchDetail {
		fmt.Fprintf(w, "                      %s\n", d)
	}
	fmt.Fprintf(w, "  lost results:       %d (Gets that failed or timed out)\n", s.LostResults)
	fmt.Fprintf(w, "  stale overwrites:   %d (a value replaced by one of an older epoch)\n", s.StaleOverwrites)
	fmt.Fprintf(w, "  epochs reused:      %d\n", s.EpochsReused)
	fmt.Fprintf(w, "  duration:           %.1fs\n", s.DurationSeconds)
}

// sfDemoSchema is the demo's own record, made in its scratch database: the fake source's
// calls, every change of a stored value's epoch (by a trigger, independent of the code under
// test), and each worker's counters.
const sfDemoSchema = `
CREATE TABLE sf_demo_calls (
    id         bigserial PRIMARY KEY,
    worker     text        NOT NULL,
    key        text        NOT NULL,
    epoch      bigint      NOT NULL,
    started_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    ended_at   timestamptz,
    outcome    text
);
CREATE TABLE sf_demo_writes (
    key       text        NOT NULL,
    old_epoch bigint,
    new_epoch bigint,
    at        timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE FUNCTION sf_demo_log_write() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' AND NEW.value_epoch IS NOT NULL THEN
        INSERT INTO sf_demo_writes (key, old_epoch, new_epoch) VALUES (NEW.key, NULL, NEW.value_epoch);
    ELSIF TG_OP = 'UPDATE' AND NEW.value_epoch IS DISTINCT FROM OLD.value_epoch THEN
        INSERT INTO sf_demo_writes (key, old_epoch, new_epoch) VALUES (NEW.key, OLD.value_epoch, NEW.value_epoch);
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER sf_demo_log AFTER INSERT OR UPDATE ON batchclaim.singleflight_entries
    FOR EACH ROW EXECUTE FUNCTION sf_demo_log_write();
CREATE TABLE sf_demo_workers (
    name           text PRIMARY KEY,
    done           bool   NOT NULL DEFAULT false,
    victim_pending bool   NOT NULL DEFAULT false,
    victim_epoch   bigint NOT NULL DEFAULT 0,
    gets           bigint NOT NULL DEFAULT 0,
    errors         bigint NOT NULL DEFAULT 0,
    stale          bigint NOT NULL DEFAULT 0,
    takeovers      bigint NOT NULL DEFAULT 0,
    notify_wakeups bigint NOT NULL DEFAULT 0,
    poll_wakeups   bigint NOT NULL DEFAULT 0
);`
