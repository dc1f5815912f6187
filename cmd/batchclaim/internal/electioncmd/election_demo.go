package electioncmd

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batchclaim/batchclaim/cmd/batchclaim/internal/cli"
	"github.com/batchclaim/batchclaim/cmd/batchclaim/internal/database"
	"github.com/batchclaim/batchclaim/cmd/batchclaim/internal/redact"
	"github.com/batchclaim/batchclaim/cmd/batchclaim/internal/subproc"
	"github.com/batchclaim/batchclaim/migrations"
	"github.com/batchclaim/batchclaim/patterns/election"
	"github.com/batchclaim/batchclaim/pgdb"
	"github.com/batchclaim/batchclaim/testkit/tcpproxy"
)

// electionSummary is what `election demo --json` prints. The first three counters are the
// invariants; each is 0 in a clean run.
type electionSummary struct {
	// TwoPrimaries counts moments when two processes acted as primary of one role: records
	// of a process acting under a term, timestamped by the database, that come after a newer
	// term of the role was elected.
	TwoPrimaries int `json:"two_primaries"`
	// StalePrimaryWrites counts fenced writes accepted from a term older than the term in
	// force when they were written.
	StalePrimaryWrites int `json:"stale_primary_writes"`
	// SlowElections counts failures of a primary after which its role had no newly elected
	// primary within T + I.
	SlowElections int `json:"slow_elections"`
	// EpochRegressions counts elections whose epoch was not greater than the role's previous.
	EpochRegressions int `json:"epoch_regressions"`

	Elections           int             `json:"elections"`
	ActingRecords       int             `json:"acting_records"`
	FencedWrites        int             `json:"fenced_writes"`
	StaleWritesRejected int             `json:"stale_writes_rejected"`
	MaxElectionSeconds  float64         `json:"max_election_seconds"`
	IntervalSeconds     float64         `json:"interval_seconds"`
	TimeoutSeconds      float64         `json:"timeout_seconds"`
	Processes           int             `json:"processes"`
	Roles               []string        `json:"roles"`
	Faults              []electionFault `json:"faults"`
	DurationSeconds     float64         `json:"duration_seconds"`
	Database            string          `json:"database"`
}

// electionFault is one failure the demo caused.
type electionFault struct {
	Kind   string    `json:"kind"` // sigkill | sigstop | link_cut
	Victim string    `json:"victim"`
	Roles  []string  `json:"roles"` // the roles the victim was primary of
	Epochs []int64   `json:"-"`
	At     time.Time `json:"at"` // database time, taken just before the fault
	// ElectionSeconds: per role, from the fault to the next election (database time).
	ElectionSeconds map[string]float64 `json:"election_seconds"`
}

var electionDemoRoles = []string{"scheduler", "broker"}

type electionDemoRun struct {
	out      io.Writer
	pool     *pgxpool.Pool
	db       pgdb.DB // every statement goes through it
	schema   string
	dbURL    *url.URL
	logDir   string
	interval time.Duration
	timeout  time.Duration
	kids     map[string]*subproc.Child
	proxies  map[string]*tcpproxy.Proxy
	listen   map[string]string
	start    time.Time
	faults   []electionFault
}

func electionDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("election demo", "[flags]",
		"Three processes of this binary stand for two roles on a throwaway database (DATABASE_URL if\n"+
			"set, else a local throwaway cluster, else Docker), each elector through its own TCP proxy.\n"+
			"The demo SIGKILLs the primary of one role, SIGSTOPs the primary of the other past the\n"+
			"timeout and resumes it, and cuts the elector's database link of a primary that keeps\n"+
			"running (its work still reaches the database); then it checks the recorded history:\n"+
			"two_primaries, stale_primary_writes and slow_elections must all be 0, or it exits 1.", stderr)
	asJSON := fs.Bool("json", false, "print the summary as one JSON object on stdout (the story goes to stderr)")
	keep := fs.Bool("keep-db", false, "keep the scratch database afterwards")
	schema := database.SchemaFlag(fs)
	interval := fs.Duration("interval", 600*time.Millisecond, "I: heartbeat interval of the processes")
	timeout := fs.Duration("timeout", 2*time.Second, "T: election timeout of the processes (> 2I)")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if _, err := (election.Config{Roles: electionDemoRoles, HeartbeatInterval: *interval, Timeout: *timeout}).Resolve(); err != nil {
		return err
	}
	if err := pgdb.ValidateSchema(*schema); err != nil {
		return fmt.Errorf("--schema: %w", err)
	}
	out := stdout
	if *asJSON {
		out = stderr
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	sdb, err := database.NewScratch(ctx, "batchclaim_election", *keep, out, logger, migrations.InSchema(*schema))
	if err != nil {
		return err
	}
	defer sdb.Close(ctx)
	d := &electionDemoRun{out: out, schema: *schema, interval: *interval, timeout: *timeout, start: time.Now(),
		kids: map[string]*subproc.Child{}, proxies: map[string]*tcpproxy.Proxy{}, listen: map[string]string{}}
	if d.dbURL, err = url.Parse(sdb.URL); err != nil {
		return err
	}
	if d.pool, err = database.Open(ctx, sdb.URL, 4); err != nil {
		return err
	}
	defer d.pool.Close()
	if d.db, err = pgdb.Open(d.pool, d.schema); err != nil {
		return err
	}
	if _, err := d.db.Exec(ctx, electionDemoSchema); err != nil {
		return fmt.Errorf("create the demo's tables: %w", err)
	}
	if d.logDir, err = os.MkdirTemp("", "batchclaim-election-"); err != nil {
		return err
	}
	defer d.stopAll()
	if err := d.story(ctx); err != nil {
		return fmt.Errorf("%w (process logs in %s)", err, d.logDir)
	}
	d.stopAll()
	sum, err := d.check(ctx)
	if err != nil {
		return err
	}
	sum.Database = redact.URL(sdb.URL)
	if err := cli.WriteSummary(stdout, *asJSON, sum, sum.print); err != nil {
		return err
	}
	if sum.TwoPrimaries > 0 || sum.StalePrimaryWrites > 0 || sum.SlowElections > 0 || sum.EpochRegressions > 0 {
		return cli.ExitError{Code: 1, Msg: fmt.Sprintf("invariant violated: two_primaries=%d stale_primary_writes=%d slow_elections=%d epoch_regressions=%d (process logs in %s)",
			sum.TwoPrimaries, sum.StalePrimaryWrites, sum.SlowElections, sum.EpochRegressions, d.logDir)}
	}
	if sum.FencedWrites == 0 || sum.ActingRecords == 0 {
		return cli.ExitError{Code: 1, Msg: "no primary recorded any work: the run proved nothing (process logs in " + d.logDir + ")"}
	}
	return nil
}

// story starts the processes and causes the faults, one after the other. node-1 stands for
// the first role only and node-2 for the second only (the source's single-type model, one
// type per instance); node-3 stands for both (many roles in one table, one primary each).
func (d *electionDemoRun) story(ctx context.Context) error {
	fmt.Fprintf(d.out, "3 processes stand for roles %s; heartbeat interval I = %s, timeout T = %s; logs in %s\n\n",
		strings.Join(electionDemoRoles, ", "), d.interval, d.timeout, d.logDir)
	if err := d.startWorker("node-1"); err != nil {
		return err
	}
	if err := d.startWorker("node-2"); err != nil {
		return err
	}
	if err := d.waitFor(ctx, 30*time.Second, "a primary for every role", func() bool {
		return len(d.primaries(ctx)) == len(electionDemoRoles)
	}); err != nil {
		return err
	}
	if err := d.startWorker("node-3"); err != nil {
		return err
	}
	d.show(ctx, "elected")
	d.steady(ctx)

	victim := d.primaries(ctx)[electionDemoRoles[0]].Name
	if err := d.fault(ctx, "sigkill", victim, func() error { return d.kids[victim].Signal(syscall.SIGKILL) }); err != nil {
		return err
	}
	<-d.kids[victim].Done()
	fmt.Fprintf(d.out, "    restarting %s as a standby\n\n", victim)
	if err := d.startWorker(victim); err != nil {
		return err
	}
	d.steady(ctx)

	victim = d.primaries(ctx)[electionDemoRoles[1]].Name
	if err := d.fault(ctx, "sigstop", victim, func() error { return d.kids[victim].Signal(syscall.SIGSTOP) }); err != nil {
		return err
	}
	d.steady(ctx)
	if err := d.kids[victim].Signal(syscall.SIGCONT); err != nil {
		return err
	}
	fmt.Fprintf(d.out, "    SIGCONT %s: it must find its deadline passed and step down without acting\n", victim)
	d.waitProbe(ctx, victim)

	// Only the elector's link goes through the proxy: the process keeps running and keeps
	// its link for the work, so if it went on believing it is primary past its deadline, its
	// records of acting would overlap its successor's.
	victim = d.primaries(ctx)[electionDemoRoles[0]].Name
	p := d.proxies[victim]
	if err := d.fault(ctx, "link_cut", victim, func() error { p.Cut(); return nil }); err != nil {
		return err
	}
	d.steady(ctx)
	p.Restore()
	fmt.Fprintf(d.out, "    link of %s restored: it joins again as a standby\n", victim)
	d.waitProbe(ctx, victim)

	for _, role := range electionDemoRoles {
		d.askHTTP(ctx, role)
	}
	return nil
}

// steady lets the primaries work for a while (2I) before the next step.
func (d *electionDemoRun) steady(ctx context.Context) {
	select {
	case <-ctx.Done():
	case <-time.After(2 * d.interval):
	}
}

// fault records the roles victim is primary of and the database time, runs do, and waits for
// a newer primary of each of those roles.
func (d *electionDemoRun) fault(ctx context.Context, kind, victim string, do func() error) error {
	f := electionFault{Kind: kind, Victim: victim, ElectionSeconds: map[string]float64{}}
	for role, t := range d.primaries(ctx) {
		if t.Name == victim {
			f.Roles, f.Epochs = append(f.Roles, role), append(f.Epochs, t.Epoch)
		}
	}
	if len(f.Roles) == 0 {
		return fmt.Errorf("%s is primary of nothing any more; cannot stage the %s fault", victim, kind)
	}
	if err := d.db.QueryRow(ctx, "SELECT clock_timestamp()").Scan(&f.At); err != nil {
		return err
	}
	if err := do(); err != nil {
		return fmt.Errorf("%s %s: %w", kind, victim, err)
	}
	d.faults = append(d.faults, f)
	fmt.Fprintf(d.out, ">>> t=%4.1fs  %s %s, primary of %s\n", time.Since(d.start).Seconds(), strings.ToUpper(strings.ReplaceAll(kind, "_", " ")), victim, strings.Join(f.Roles, ", "))
	err := d.waitFor(ctx, 5*d.timeout+10*time.Second, "new primaries after "+kind+" of "+victim, func() bool {
		ps := d.primaries(ctx)
		for i, role := range f.Roles {
			if t, ok := ps[role]; !ok || t.Epoch <= f.Epochs[i] {
				return false
			}
		}
		return true
	})
	if err != nil {
		return err
	}
	d.show(ctx, "after "+kind)
	return nil
}

// primaries returns each role's live primary, by the database.
func (d *electionDemoRun) primaries(ctx context.Context) map[string]election.Term {
	out := map[string]election.Term{}
	for _, role := range electionDemoRoles {
		if t, err := election.GetPrimary(ctx, d.db, role); err == nil {
			out[role] = t
		}
	}
	return out
}

func (d *electionDemoRun) show(ctx context.Context, what string) {
	ps := d.primaries(ctx)
	var parts []string
	for _, role := range electionDemoRoles {
		if t, ok := ps[role]; ok {
			parts = append(parts, fmt.Sprintf("%s: %s (epoch %d)", role, t.Name, t.Epoch))
		} else {
			parts = append(parts, role+": none")
		}
	}
	fmt.Fprintf(d.out, "    t=%4.1fs  %-16s %s\n", time.Since(d.start).Seconds(), what, strings.Join(parts, "   "))
}

// waitProbe waits (bounded, not required) until victim recorded its stale-term probe.
func (d *electionDemoRun) waitProbe(ctx context.Context, victim string) {
	var rejected bool
	err := d.waitFor(ctx, 15*time.Second, "", func() bool {
		return d.db.QueryRow(ctx, `SELECT rejected FROM election_demo_probes WHERE name = $1 ORDER BY id DESC LIMIT 1`, victim).Scan(&rejected) == nil
	})
	switch {
	case err != nil:
		fmt.Fprintf(d.out, "    %s recorded no stale-term probe\n\n", victim)
	case rejected:
		fmt.Fprintf(d.out, "    %s tried a write fenced with its old term: refused\n\n", victim)
	default:
		fmt.Fprintf(d.out, "    %s tried a write fenced with its old term: ACCEPTED\n\n", victim)
	}
}

// askHTTP asks node-1's GET /primary?role=R, as another service on its host would.
func (d *electionDemoRun) askHTTP(ctx context.Context, role string) {
	addr := d.listen["node-1"]
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/primary?role="+url.QueryEscape(role), nil)
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		fmt.Fprintf(d.out, "    GET /primary?role=%s on node-1: %v\n", role, err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Fprintf(d.out, "    GET /primary?role=%s on node-1: %d %s\n", role, resp.StatusCode, strings.TrimSpace(string(body)))
}

func (d *electionDemoRun) startWorker(name string) error {
	p, ok := d.proxies[name]
	if !ok {
		var err error
		if p, err = tcpproxy.Start("127.0.0.1:0", d.dbURL.Host); err != nil {
			return err
		}
		d.proxies[name] = p
	}
	via := *d.dbURL
	via.Host = p.Addr()
	addr, err := subproc.FreeAddr()
	if err != nil {
		return err
	}
	d.listen[name] = addr
	roles := electionDemoRoles
	switch name {
	case "node-1":
		roles = electionDemoRoles[:1]
	case "node-2":
		roles = electionDemoRoles[1:]
	}
	k, err := subproc.Start(name, filepath.Join(d.logDir, name+".log"), "election", "run",
		"--database-url", via.String(), "--roles", strings.Join(roles, ","), "--name", name,
		"--interval", d.interval.String(), "--timeout", d.timeout.String(), "--listen", addr, "--demo-writes", "--demo-work-database-url", d.dbURL.String(),
		"--schema", d.schema)
	if err != nil {
		return err
	}
	d.kids[name] = k
	return nil
}

// waitFor polls cond until it holds; it fails if it does not within limit, or if a process
// that was not killed on purpose exited.
func (d *electionDemoRun) waitFor(ctx context.Context, limit time.Duration, what string, cond func() bool) error {
	deadline := time.Now().Add(limit)
	for !cond() {
		for name, k := range d.kids {
			if k.Exited() && !d.killed(name) {
				return fmt.Errorf("%s exited unexpectedly: %v", name, k.Err)
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no %s within %s", what, limit)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil
}

func (d *electionDemoRun) killed(name string) bool {
	for _, f := range d.faults {
		if f.Kind == "sigkill" && f.Victim == name {
			return true
		}
	}
	return false
}

func (d *electionDemoRun) stopAll() {
	for _, k := range d.kids {
		k.Stop(10 * time.Second)
	}
	for _, p := range d.proxies {
		_ = p.Close()
	}
}

// check reads the recorded history and counts violations of the invariants.
func (d *electionDemoRun) check(ctx context.Context) (electionSummary, error) {
	s := electionSummary{IntervalSeconds: d.interval.Seconds(), TimeoutSeconds: d.timeout.Seconds(), Processes: 3,
		Roles: electionDemoRoles, Faults: d.faults}
	count := func(dst *int, sql string, args ...any) error {
		if err := d.db.QueryRow(ctx, sql, args...).Scan(dst); err != nil {
			return fmt.Errorf("check %q: %w", sql, err)
		}
		return nil
	}
	// A record of acting (or a fenced write) under epoch e, stamped by the database after a
	// term newer than e of the same role was elected, is two primaries (a stale write).
	const afterNewer = ` x WHERE EXISTS (SELECT 1 FROM batchclaim.election_events e
	    WHERE e.role = x.role AND e.event = 'elected' AND e.epoch > x.epoch AND e.at < x.at)`
	for _, c := range []struct {
		dst  *int
		sql  string
		args []any
	}{
		{&s.TwoPrimaries, `SELECT count(*) FROM election_demo_acting` + afterNewer, nil},
		{&s.StalePrimaryWrites, `SELECT count(*) FROM election_demo_writes` + afterNewer, nil},
		{&s.EpochRegressions, `SELECT count(*) FROM (SELECT epoch, lag(epoch) OVER (PARTITION BY role ORDER BY id) AS prev
		    FROM batchclaim.election_events WHERE event = 'elected') x WHERE x.epoch <= x.prev`, nil},
		{&s.Elections, `SELECT count(*) FROM batchclaim.election_events WHERE event = 'elected'`, nil},
		{&s.ActingRecords, `SELECT count(*) FROM election_demo_acting`, nil},
		{&s.FencedWrites, `SELECT count(*) FROM election_demo_writes`, nil},
		{&s.StaleWritesRejected, `SELECT count(*) FROM election_demo_probes WHERE rejected`, nil},
	} {
		if err := count(c.dst, c.sql, c.args...); err != nil {
			return s, err
		}
	}
	limit := (d.timeout + d.interval).Seconds()
	for i := range s.Faults {
		f := &s.Faults[i]
		for j, role := range f.Roles {
			var gap *float64
			if err := d.db.QueryRow(ctx, `SELECT EXTRACT(EPOCH FROM min(at) - $3::timestamptz)::float8 FROM batchclaim.election_events
			    WHERE role = $1 AND event = 'elected' AND epoch > $2`, role, f.Epochs[j], f.At).Scan(&gap); err != nil {
				return s, fmt.Errorf("check election after fault: %w", err)
			}
			if gap == nil || *gap > limit {
				s.SlowElections++
			}
			if gap != nil {
				f.ElectionSeconds[role] = *gap
				s.MaxElectionSeconds = max(s.MaxElectionSeconds, *gap)
			}
		}
	}
	s.DurationSeconds = time.Since(d.start).Seconds()
	return s, nil
}

func (s electionSummary) print(w io.Writer) {
	fmt.Fprintf(w, "\nsummary (%d processes, roles %s, I = %.1fs, T = %.1fs, database: %s)\n", s.Processes,
		strings.Join(s.Roles, ", "), s.IntervalSeconds, s.TimeoutSeconds, s.Database)
	for _, f := range s.Faults {
		roles := slices.Sorted(func(yield func(string) bool) {
			for r := range f.ElectionSeconds {
				if !yield(r) {
					return
				}
			}
		})
		var parts []string
		for _, r := range roles {
			parts = append(parts, fmt.Sprintf("%s re-elected after %.2fs", r, f.ElectionSeconds[r]))
		}
		fmt.Fprintf(w, "  fault: %-8s %s: %s\n", f.Kind, f.Victim, strings.Join(parts, ", "))
	}
	fmt.Fprintf(w, "  elections:             %d (epochs strictly increasing per role: %d regressions)\n", s.Elections, s.EpochRegressions)
	fmt.Fprintf(w, "  two primaries:         %d (of %d records of a process acting as primary)\n", s.TwoPrimaries, s.ActingRecords)
	fmt.Fprintf(w, "  stale primary writes:  %d (of %d fenced writes; %d writes with an old term refused)\n", s.StalePrimaryWrites, s.FencedWrites, s.StaleWritesRejected)
	fmt.Fprintf(w, "  slow elections:        %d (slowest %.2fs after its failure; the bound is T + I = %.1fs)\n", s.SlowElections, s.MaxElectionSeconds, s.TimeoutSeconds+s.IntervalSeconds)
	fmt.Fprintf(w, "  duration:              %.1fs\n", s.DurationSeconds)
}
