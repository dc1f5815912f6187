package chaos

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batchclaim/batchclaim/dlt"
	"github.com/batchclaim/batchclaim/dlt/dltsim"
	"github.com/batchclaim/batchclaim/inspect"
	"github.com/batchclaim/batchclaim/testkit/history"
)

// run is the state of one chaos run.
type run struct {
	cfg       Config
	replay    string // the command that replays the run, from its config before skips
	db        *servers
	pool      *pgxpool.Pool
	sim       *dltsim.Sim
	simURL    string
	logDir    string
	instances []*instance
	numbers   batchNumbers
	arrived   atomic.Int64
	start     time.Time
	// halt: the instances run with --halt-on-invalid.
	halt bool
	// hostMu is held by the host lane for each fault and by the operations that act on the
	// instances, so that the two never overlap.
	hostMu sync.Mutex
	// dropIdle is the --drop-idle-after that drop_idle_on turned on (nanoseconds; 0: off).
	dropIdle atomic.Int64
	// snapOpen: a long_snapshot transaction is open; snaps waits for it, snapStop ends it.
	snapOpen atomic.Bool
	snaps    sync.WaitGroup
	snapStop chan struct{}

	mu     sync.Mutex
	faults map[string]int
	stores map[string]stored // by batch id
	// stopped: instances stopped gracefully at the end, with the database time their stop
	// began (a graceful stop deregisters, which frees what it still holds without an event).
	stopped map[uuid.UUID]time.Time
	// beforeFailover: acquisitions each killed primary had; the new primary must have them.
	beforeFailover []acquisition
	victims        []*victim
	// leaderTakeovers: what each Patroni leader fault cost; slowLeader: those past their
	// bound, as problems.
	leaderTakeovers []LeaderTakeover
	slowLeader      []string
	problems        []string
	stalled         []string // link_freeze and pool_hog victims that did not go on working
	slowWakeups     []string // held_enqueue batches their service_id's holder did not hear of
	bulkReports     []string // bulk enqueues that reported a repeat as new or under another seq
	unbalanced      string   // why the claims never balanced; empty when they did
	skipped         []string
	// dropIdleFrom: database time drop_idle_on began (zero: it did not run).
	dropIdleFrom time.Time
	ops          []OpRecord
	opCounts     map[string]int
	opsSkipped   []string
	// promises: the jobs a Retry of the run revived, as the Retry's client was told.
	promises []history.Promise
	// quiesceResumes: halts lifted so that quiescence could finish every batch.
	quiesceResumes int
}

// Run performs one chaos run and checks its history. The error is for a run that could not
// be carried out; violations of the invariants are in the Report.
func Run(ctx context.Context, cfg Config) (Report, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return Report{}, err
	}
	r := &run{cfg: cfg, replay: replayCommand(cfg), faults: map[string]int{}, stores: map[string]stored{}, numbers: batchNumbers{next: map[string]int{}},
		opCounts: map[string]int{}, snapStop: make(chan struct{}), halt: cfg.halts()}
	r.say("seed %d: replay with: %s", cfg.Seed, r.replay)
	if !r.halt {
		r.skipOps(OpResume)
	}
	var err error
	if r.db, err = startServers(ctx, cfg, r.say); err != nil {
		return Report{}, err
	}
	defer r.db.close(ctx)
	if !r.db.own || r.db.ha != nil {
		r.skip(localKinds...)
	}
	if r.db.ha == nil {
		r.skip(patroniKinds...)
	}
	if r.pool, err = r.db.pool(ctx); err != nil {
		return Report{}, err
	}
	defer r.pool.Close()
	if slices.Contains(cfg.Ops, OpUpgrade) {
		v, err := r.startOnPreviousSchema(ctx)
		if err != nil {
			return Report{}, err
		}
		r.say("schema version %d until the upgrade operation applies the latest migration", v)
	}
	if err := history.InstallAudit(ctx, r.pool); err != nil {
		return Report{}, err
	}
	if err := r.startLedger(); err != nil {
		return Report{}, err
	}
	defer r.sim.Close()
	if r.logDir = cfg.LogDir; r.logDir == "" {
		if r.logDir, err = os.MkdirTemp("", "batchclaim-chaos-"); err != nil {
			return Report{}, err
		}
	} else if err := os.MkdirAll(r.logDir, 0o755); err != nil {
		return Report{}, fmt.Errorf("log dir: %w", err)
	}
	if err := r.enqueueInitial(ctx); err != nil {
		return Report{}, fmt.Errorf("store the first batches: %w", err)
	}
	defer func() {
		for _, in := range r.instances {
			in.stop(10 * time.Second)
			in.closeProxies()
		}
	}()
	for i := range cfg.Instances {
		in, err := newInstance(i+1, r.db.addrs)
		if err != nil {
			return Report{}, err
		}
		r.instances = append(r.instances, in)
		if err := in.start(r); err != nil {
			return Report{}, err
		}
	}
	if !r.settle(ctx, time.Minute) {
		return Report{}, fmt.Errorf("the instances did not all register within a minute; see their logs in %s", r.logDir)
	}
	r.say("%d instances (logs in %s); R=%v T1=%v T2=%v; halt-on-invalid %t; ledger at %s", cfg.Instances, r.logDir, cfg.Renew, cfg.Expiry1, cfg.Expiry2, r.halt, r.simURL)
	if !r.spreadOut(ctx, spreadWait) {
		r.say("the claims were not spread evenly over the instances within %v; the faults start anyway", spreadWait)
	}
	r.start = time.Now()
	r.chaos(ctx)
	if ctx.Err() != nil {
		return Report{}, ctx.Err()
	}
	r.quiesce(ctx)
	close(r.snapStop)
	r.snaps.Wait()
	r.stopAll(ctx)
	if err := r.writeOps(); err != nil {
		r.say("operations not written to %s: %v", r.logDir, err)
	}
	// The history is read from whichever server is primary now; a read that meets a
	// failover (or a pool connection to a server that is gone) is tried again.
	var rep Report
	err = history.Retry(ctx, checkRetryLimit, func(ctx context.Context) error {
		var err error
		rep, err = r.check(ctx)
		return err
	})
	return rep, err
}

// spreadWait bounds the wait for the claims to be spread over the instances before the first
// fault (spreadOut).
const spreadWait = 30 * time.Second

// checkRetryLimit bounds how long the check tries again to read the history.
const checkRetryLimit = 2 * time.Minute

// stopAll stops every instance gracefully, one after another, noting when each stop began.
func (r *run) stopAll(ctx context.Context) {
	r.stopped = map[uuid.UUID]time.Time{}
	for _, in := range r.instances {
		id := in.lookupID(ctx, r.pool)
		var at time.Time
		qctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		err := r.pool.QueryRow(qctx, `SELECT now()`).Scan(&at)
		cancel()
		if err == nil && id != uuid.Nil {
			r.stopped[id] = at
		}
		in.stop(10 * time.Second)
	}
}

func replayCommand(c Config) string {
	cmd := fmt.Sprintf("batchclaim chaos --seed %d --duration %s --instances %d --service-ids %d --batches %d",
		c.Seed, c.Duration, c.Instances, c.ServiceIDs, c.Batches)
	for _, f := range []struct {
		name      string
		v, defval time.Duration
	}{{"renew-interval", c.Renew, RenewDefault}, {"expiry-1", c.Expiry1, Expiry1Default},
		{"expiry-2", c.Expiry2, Expiry2Default}, {"allowance", c.Allowance, AllowanceDefault}, {"drop-idle-after", c.DropIdleAfter, 0}} {
		if f.v != f.defval {
			cmd += fmt.Sprintf(" --%s %s", f.name, f.v)
		}
	}
	if c.AsyncStandby {
		cmd += " --async-standby"
	}
	if c.Cluster != ClusterLocal && c.Cluster != "" {
		cmd += " --cluster " + c.Cluster
	}
	if len(c.Kinds) != len(Kinds()) {
		cmd += " --faults " + strings.Join(c.Kinds, ",")
	}
	switch {
	case len(c.Ops) == 0:
		cmd += " --ops none"
	case len(c.Ops) != len(Operations()):
		cmd += " --ops " + strings.Join(c.Ops, ",")
	}
	if c.HaltOnInvalid != HaltFromSeed && c.HaltOnInvalid != "" {
		cmd += " --halt-on-invalid " + c.HaltOnInvalid
	}
	return cmd
}

func (r *run) startLedger() error {
	sim, err := dltsim.New(dltsim.Config{Flavor: dlt.FlavorSawtooth, CommitLatency: 300 * time.Millisecond,
		InvalidRate: 0.02, Seed: r.cfg.Seed})
	if err != nil {
		return err
	}
	if r.simURL, err = sim.Listen(); err != nil {
		return err
	}
	r.sim = sim
	return nil
}

func (r *run) say(format string, a ...any) {
	line := fmt.Sprintf(format, a...)
	if !r.start.IsZero() {
		line = fmt.Sprintf("t=%5.1fs %s", time.Since(r.start).Seconds(), line)
	}
	fmt.Fprintln(r.cfg.Progress, line)
}

func (r *run) event(kind, format string, a ...any) { r.say(">>> "+kind+": "+format, a...) }

func (r *run) count(kind string) {
	r.mu.Lock()
	r.faults[kind]++
	r.mu.Unlock()
}

func (r *run) problem(format string, a ...any) {
	r.mu.Lock()
	r.problems = append(r.problems, fmt.Sprintf(format, a...))
	r.mu.Unlock()
	r.say("problem: "+format, a...)
}

func (r *run) skip(kinds ...string) {
	for _, k := range kinds {
		if i := indexOf(r.cfg.Kinds, k); i >= 0 {
			r.cfg.Kinds = append(r.cfg.Kinds[:i:i], r.cfg.Kinds[i+1:]...)
			r.skipped = append(r.skipped, k)
		}
	}
}

// skipOps leaves operations out of the run, listing them as skipped.
func (r *run) skipOps(kinds ...string) {
	for _, k := range kinds {
		if i := indexOf(r.cfg.Ops, k); i >= 0 {
			r.cfg.Ops = append(r.cfg.Ops[:i:i], r.cfg.Ops[i+1:]...)
			r.opsSkipped = append(r.opsSkipped, k)
		}
	}
}

func indexOf(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

// chaos runs the two fault lanes and the arrivals for the configured duration.
func (r *run) chaos(ctx context.Context) {
	until := r.start.Add(r.cfg.Duration)
	var host, ledger []string
	for _, k := range r.cfg.Kinds {
		if indexOf(hostKinds, k) >= 0 {
			host = append(host, k)
		} else {
			ledger = append(ledger, k)
		}
	}
	feedCtx, stopFeed := context.WithCancel(ctx)
	var wg sync.WaitGroup
	seed := uint64(r.cfg.Seed)
	wg.Go(func() { r.feed(feedCtx, rand.New(rand.NewPCG(seed, 3))) })
	wg.Go(func() { r.watch(feedCtx) })
	var lanes sync.WaitGroup
	if len(host) > 0 {
		lanes.Go(func() { r.lane(ctx, host, rand.New(rand.NewPCG(seed, 1)), until) })
	}
	if len(ledger) > 0 {
		lanes.Go(func() { r.lane(ctx, ledger, rand.New(rand.NewPCG(seed, 2)), until) })
	}
	if len(r.cfg.Ops) > 0 {
		lanes.Go(func() { r.opsLane(ctx, rand.New(rand.NewPCG(seed, 4)), until) })
	}
	lanes.Wait()
	stopFeed()
	wg.Wait()
	r.sim.ClearFaults()
	r.say("faults stopped; %d batches arrived during the run", r.arrived.Load())
}

// watch prints a status line every few seconds and notices instances that exited by
// themselves.
func (r *run) watch(ctx context.Context) {
	t := time.NewTicker(5 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		r.checkExited()
		r.status(ctx)
	}
}

// checkExited restarts an instance that exited without being told to, and reports it.
func (r *run) checkExited() {
	for _, in := range r.instances {
		if name, state, _ := in.snapshot(); state == stateExited {
			r.problem("%s exited by itself (see %s/%s.log); starting a new one", name, r.logDir, name)
			if err := in.start(r); err != nil {
				r.problem("restart of slot %d: %v", in.slot, err)
			}
		}
	}
}

// status prints one line: batches finished and claims per instance.
func (r *run) status(ctx context.Context) (finished, total int) {
	qctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	totals, err := inspect.Totals(qctx, r.pool)
	if err != nil {
		r.say("status: database unreachable (%v)", err)
		return -1, -1
	}
	finished, total = int(totals.Finished()), int(totals.Total())
	counts, _ := r.claimCounts(qctx)
	var cells []string
	for _, in := range r.instances {
		name, state, id := in.snapshot()
		cell := fmt.Sprintf("%s:%d", name, counts[id])
		if state != stateRunning {
			cell += "[" + state + "]"
		}
		cells = append(cells, cell)
	}
	r.say("finished %d/%d; claims %s", finished, total, strings.Join(cells, " "))
	return finished, total
}

// claimCounts returns the claims held per instance id.
func (r *run) claimCounts(ctx context.Context) (map[uuid.UUID]int, error) {
	for _, in := range r.instances {
		in.lookupID(ctx, r.pool)
	}
	rows, err := r.pool.Query(ctx, `SELECT claimant, count(*) FROM batchclaim.service_id_claims WHERE claimant IS NOT NULL GROUP BY claimant`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[uuid.UUID]int{}
	for rows.Next() {
		var id uuid.UUID
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			return nil, err
		}
		out[id] = n
	}
	return out, rows.Err()
}

// quiesce waits, with every fault stopped and every instance running, until every batch is
// finished, then until the claims are balanced.
func (r *run) quiesce(ctx context.Context) {
	for _, in := range r.instances {
		in.signal(syscall.SIGCONT, stateRunning)
		for _, p := range in.proxies {
			p.Restore()
		}
	}
	r.checkExited()
	deadline := time.Now().Add(r.cfg.Quiesce)
	var last time.Time
	for ; time.Now().Before(deadline) && ctx.Err() == nil; r.sleep(ctx, 500*time.Millisecond) {
		if r.halt {
			// A halted service_id keeps its batches queued until resumed: resume it.
			if n := r.resumeAll(ctx); n > 0 {
				r.mu.Lock()
				r.quiesceResumes += n
				r.mu.Unlock()
			}
		}
		var finished, total int
		if time.Since(last) > 5*time.Second {
			finished, total = r.status(ctx)
			last = time.Now()
			r.checkExited()
		} else {
			finished, total = r.progress(ctx)
		}
		if total > 0 && finished == total {
			r.say("quiescent: every batch finished")
			break
		}
	}
	if !time.Now().Before(deadline) {
		r.dumpStacks(ctx, "not quiescent")
	}
	balanceDeadline := time.Now().Add(BalanceWaitDefault)
	for ctx.Err() == nil {
		b, err := r.balance(ctx)
		if err == nil {
			if b.even() {
				r.say("balanced: %s", b.desc)
				return
			}
			if time.Now().After(balanceDeadline) {
				r.unbalanced = fmt.Sprintf("claims per instance after %v of quiescence: %s (held by others: %d)",
					BalanceWaitDefault, b.desc, b.others)
				r.say("unbalanced: %s", r.unbalanced)
				r.dumpStacks(ctx, "unbalanced")
				return
			}
		}
		r.sleep(ctx, 500*time.Millisecond)
	}
}

// spread is how the service_ids' claims are held: per slot, by others (instances no slot
// runs any more), and by nobody.
type spread struct {
	per            []int // the slots' counts, sorted
	others, nobody int
	desc           string // name:count per slot
}

// even reports whether the slots' counts differ by at most one and nobody else holds a claim.
func (s spread) even() bool { return s.per[len(s.per)-1]-s.per[0] <= 1 && s.others == 0 }

// balance reads how the claims are spread over the slots.
func (r *run) balance(ctx context.Context) (spread, error) {
	counts, err := r.claimCounts(ctx)
	if err != nil {
		return spread{}, err
	}
	var s spread
	if err := r.pool.QueryRow(ctx, `SELECT count(*) FROM batchclaim.service_id_claims WHERE claimant IS NULL`).Scan(&s.nobody); err != nil {
		return spread{}, err
	}
	var ids []string
	for _, in := range r.instances {
		name, _, id := in.snapshot()
		s.per = append(s.per, counts[id])
		ids = append(ids, fmt.Sprintf("%s:%d", name, counts[id]))
	}
	sort.Ints(s.per)
	for _, n := range counts {
		s.others += n
	}
	s.others -= sumInts(s.per)
	s.desc = strings.Join(ids, " ")
	return s, nil
}

// spreadOut waits, up to limit, until the slots hold every service_id between them evenly,
// before the first fault: on a slow machine the first fault came while the instances were
// still taking their claims, hit a victim that held none, and had nothing to judge. It
// reports whether they did.
func (r *run) spreadOut(ctx context.Context, limit time.Duration) bool {
	for deadline := time.Now().Add(limit); ctx.Err() == nil; r.sleep(ctx, 200*time.Millisecond) {
		if s, err := r.balance(ctx); err == nil && s.even() && s.nobody == 0 {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
	return false
}

// dumpStacks saves the goroutines of every running instance (its profiles on its loopback
// listener) beside its log, so that an instance that holds a lease but makes no progress can
// be read after the run, and says where each went, or why not.
func (r *run) dumpStacks(ctx context.Context, why string) {
	for _, in := range r.instances {
		name, state, _ := in.snapshot()
		if state != stateRunning {
			continue
		}
		path := filepath.Join(r.logDir, name+".goroutines.txt")
		if err := saveURL(ctx, "http://"+in.listen+"/debug/pprof/goroutine?debug=2", path); err != nil {
			r.say("%s: %s's goroutines not read: %v", why, name, err)
			continue
		}
		r.say("%s: %s's goroutines in %s", why, name, path)
	}
}

// saveDiagnostics saves one instance's goroutines and metrics beside its log, in files named
// after it and tag, and says where they went (or why not).
func (r *run) saveDiagnostics(ctx context.Context, in *instance, tag string) string {
	name, _, _ := in.snapshot()
	var said []string
	for _, f := range []struct{ what, path, file string }{
		{"goroutines", "/debug/pprof/goroutine?debug=2", name + "." + tag + ".goroutines.txt"},
		{"metrics", "/metrics", name + "." + tag + ".metrics.txt"},
	} {
		path := filepath.Join(r.logDir, f.file)
		if err := saveURL(ctx, "http://"+in.listen+f.path, path); err != nil {
			said = append(said, fmt.Sprintf("its %s not read: %v", f.what, err))
			continue
		}
		said = append(said, fmt.Sprintf("its %s in %s", f.what, path))
	}
	return strings.Join(said, ", ")
}

// saveURL writes what a GET of u answers to path.
func saveURL(ctx context.Context, u, path string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func sumInts(v []int) int {
	s := 0
	for _, x := range v {
		s += x
	}
	return s
}

// progress counts finished and total batches without printing.
func (r *run) progress(ctx context.Context) (finished, total int) {
	qctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	totals, err := inspect.Totals(qctx, r.pool)
	if err != nil {
		return -1, -1
	}
	return int(totals.Finished()), int(totals.Total())
}
