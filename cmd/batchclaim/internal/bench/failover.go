package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batchclaim/batchclaim/claims"
	"github.com/batchclaim/batchclaim/cmd/batchclaim/internal/subproc"
	"github.com/batchclaim/batchclaim/dlt"
	"github.com/batchclaim/batchclaim/dlt/dltsim"
	"github.com/batchclaim/batchclaim/ingest"
	"github.com/batchclaim/batchclaim/pgdb"
)

// failoverConfig is the shape of a failover run.
type failoverConfig struct {
	instances, serviceIDs, repeat int
	renew, expiry1, expiry2       time.Duration
	keep                          bool
}

// failoverMeasure is one of the three measurements: every sample in seconds, from the fault
// to the next POST of the orphaned service_id by another instance, both by the database clock.
type failoverMeasure struct {
	Samples       []float64 `json:"samples"`
	Max           float64   `json:"max"`
	Mean          float64   `json:"mean"`
	Target        float64   `json:"target"`
	TargetFormula string    `json:"target_formula"`
	Met           bool      `json:"met"`
}

func (m *failoverMeasure) add(s float64) {
	m.Samples = append(m.Samples, round3(s))
	m.Max = round3(slices.Max(m.Samples))
	var sum float64
	for _, x := range m.Samples {
		sum += x
	}
	m.Mean = round3(sum / float64(len(m.Samples)))
	m.Met = m.Max <= m.Target
}

// failoverResult is the failover scenario's JSON line.
type failoverResult struct {
	Scenario       string          `json:"scenario"`
	Instances      int             `json:"instances"`
	ServiceIDs     int             `json:"service_ids"`
	Repeat         int             `json:"repeat"`
	RenewMs        int64           `json:"renew_interval_ms"`
	Expiry1Ms      int64           `json:"expiry_1_ms"`
	Expiry2Ms      int64           `json:"expiry_2_ms"`
	UnknownGraceMs int64           `json:"unknown_grace_ms"`
	Idle           failoverMeasure `json:"takeover_idle_seconds"`
	Busy           failoverMeasure `json:"takeover_busy_seconds"`
	SIGTERM        failoverMeasure `json:"handover_sigterm_seconds"`
	TargetsMet     bool            `json:"targets_met"`
	Seconds        float64         `json:"seconds"`
}

func (r failoverResult) print(w io.Writer) {
	fmt.Fprintf(w, "failover: %d `batchclaim run` processes, %d service_ids, ledger simulator; R %s, T1 %s, T2 %s; each fault %d times (%.0fs in all)\n",
		r.Instances, r.ServiceIDs, time.Duration(r.RenewMs)*time.Millisecond, time.Duration(r.Expiry1Ms)*time.Millisecond,
		time.Duration(r.Expiry2Ms)*time.Millisecond, r.Repeat, r.Seconds)
	fmt.Fprintf(w, "  from the fault to the orphaned service_id's next POST by another instance (database clock):\n")
	fmt.Fprintf(w, "  %-48s %7s %7s %16s %4s\n", "", "max s", "mean s", "target s", "met")
	for _, m := range []struct {
		name string
		m    failoverMeasure
	}{
		{"takeover, idle owner SIGKILLed", r.Idle},
		{"takeover, owner SIGKILLed with a POST in flight", r.Busy},
		{"hand-over after SIGTERM", r.SIGTERM},
	} {
		met := "no"
		if m.m.Met {
			met = "yes"
		}
		fmt.Fprintf(w, "  %-48s %7.2f %7.2f %6.2f %-9s %4s\n", m.name, m.m.Max, m.m.Mean, m.m.Target, "("+m.m.TargetFormula+")", met)
	}
	fmt.Fprintln(w)
}

// benchFailover runs `batchclaim run` processes against the ledger simulator, injects each
// fault repeat times and measures how long the faulted instance's service_id stays without
// a POST. Between faults the victim is replaced and the claims are left to balance.
func benchFailover(ctx context.Context, c failoverConfig, info io.Writer) (failoverResult, error) {
	began := time.Now()
	r := failoverResult{Scenario: "failover", Instances: c.instances, ServiceIDs: c.serviceIDs, Repeat: c.repeat,
		RenewMs: c.renew.Milliseconds(), Expiry1Ms: c.expiry1.Milliseconds(), Expiry2Ms: c.expiry2.Milliseconds(),
		UnknownGraceMs: c.renew.Milliseconds()}
	resolved, err := claims.Config{RenewInterval: c.renew, Expiry1: c.expiry1, Expiry2: c.expiry2,
		KnobNames: map[string]string{"RenewInterval": "--failover-renew-interval", "Expiry1": "--failover-expiry-1", "Expiry2": "--failover-expiry-2"}}.Resolve()
	if err != nil {
		return r, err
	}
	timings := resolved.Timings()
	sec := func(d time.Duration) float64 { return round3(d.Seconds()) }
	r.Idle = failoverMeasure{Target: sec(timings.Expiry1 + 2*timings.RenewInterval), TargetFormula: "T1 + 2R"}
	r.Busy = failoverMeasure{Target: sec(timings.Expiry2 + 2*timings.RenewInterval), TargetFormula: "T2 + 2R"}
	r.SIGTERM = failoverMeasure{Target: sec(2 * timings.RenewInterval), TargetFormula: "2R"}

	db, admin, err := scratchWithAdmin(ctx, "batchclaim_bench_failover", c.keep, info)
	if err != nil {
		return r, err
	}
	defer db.Close(ctx)
	defer admin.Close()
	ids := make([]string, c.serviceIDs)
	for i := range ids {
		ids[i] = fmt.Sprintf("fo-%04d", i)
	}
	if err := claims.RegisterServiceIDs(ctx, admin, ids...); err != nil {
		return r, err
	}
	sim, simURL, logDir, err := startLedger("failover")
	if err != nil {
		return r, err
	}
	defer sim.Close()
	fmt.Fprintf(info, "failover: instance logs in %s\n", logDir)

	f := &fleet{admin: admin, logDir: logDir, prefix: "fo", k: c.serviceIDs, args: func(name, _ string) []string {
		return []string{"run", "--database-url", db.URL, "--dlt-url", simURL, "--instance-name", name, "--listen", "",
			"--log-level", "info", "--renew-interval", c.renew.String(), "--expiry-1", c.expiry1.String(), "--expiry-2", c.expiry2.String(),
			"--poll-interval", "200ms", "--unknown-grace", c.renew.String(), "--workers", "4",
			"--backoff-base", "50ms", "--backoff-max", "1s"}
	}}
	defer f.stopAll()
	for range c.instances {
		if err := f.start(); err != nil {
			return r, err
		}
	}
	fo := &faultRun{fleet: f, sim: sim, admin: admin, timings: timings}
	for _, m := range []struct {
		kind string
		into *failoverMeasure
	}{{"idle", &r.Idle}, {"busy", &r.Busy}, {"sigterm", &r.SIGTERM}} {
		for i := range c.repeat {
			if err := f.waitBalanced(ctx, 60*time.Second); err != nil {
				return r, err
			}
			s, err := fo.measure(ctx, m.kind)
			if err != nil {
				return r, fmt.Errorf("%s #%d: %w (instance logs in %s)", m.kind, i+1, err, logDir)
			}
			fmt.Fprintf(info, "failover: %s #%d: %.2fs\n", m.kind, i+1, s)
			m.into.add(s)
			if err := f.start(); err != nil {
				return r, err
			}
		}
	}
	r.TargetsMet = r.Idle.Met && r.Busy.Met && r.SIGTERM.Met
	r.Seconds = round3(time.Since(began).Seconds())
	f.stopAll()
	if !c.keep {
		_ = os.RemoveAll(logDir)
	}
	return r, nil
}

// fleet is a set of `batchclaim run` processes, each with a name of its own; a replaced
// process gets a new name (and so a new instance id).
type fleet struct {
	admin  *pgxpool.Pool
	logDir string
	prefix string
	k      int  // service_ids
	listen bool // each process listens on a port of its own, which it logs (--log-format json)
	args   func(name, listen string) []string
	gen    int
	kids   []*fleetKid
}

type fleetKid struct {
	*subproc.Child
	id        uuid.UUID // zero until it registered
	listen    string    // its HTTP address, when it has one
	signalled bool      // the bench stopped or killed it
}

// start starts one more process.
func (f *fleet) start() error {
	f.gen++
	name := fmt.Sprintf("%s-%d", f.prefix, f.gen)
	addr := ""
	if f.listen {
		// Port 0: the kernel picks a free one, which the process logs. (A port picked here
		// and passed on can be taken meanwhile by another process's outgoing connection.)
		addr = "127.0.0.1:0"
	}
	k, err := subproc.StartTied(name, f.logPath(name), f.args(name, addr)...)
	if err != nil {
		return err
	}
	f.kids = append(f.kids, &fleetKid{Child: k})
	return nil
}

func (f *fleet) logPath(name string) string { return filepath.Join(f.logDir, name+".log") }

// readAddrs reads from its log the HTTP address of every process that logged it since.
func (f *fleet) readAddrs() error {
	for _, k := range f.kids {
		if k.listen != "" {
			continue
		}
		b, err := os.ReadFile(f.logPath(k.Name))
		if err != nil {
			return err
		}
		for line := range strings.SplitSeq(string(b), "\n") {
			var l struct {
				Msg  string `json:"msg"`
				Addr string `json:"addr"`
			}
			if json.Unmarshal([]byte(line), &l) == nil && strings.HasPrefix(l.Msg, "listening") && l.Addr != "" {
				k.listen = l.Addr
				break
			}
		}
	}
	return nil
}

// running returns the processes the bench has not signalled, registered or not.
func (f *fleet) running() []*fleetKid {
	var out []*fleetKid
	for _, k := range f.kids {
		if !k.Exited() && !k.signalled {
			out = append(out, k)
		}
	}
	return out
}

// stopAll stops every process still running, all at once.
func (f *fleet) stopAll() {
	done := make(chan struct{})
	n := 0
	for _, k := range f.kids {
		if !k.Exited() {
			n++
			go func() { k.Stop(15 * time.Second); done <- struct{}{} }()
		}
	}
	for range n {
		<-done
	}
}

// resolve reads the instance id of every running process that registered since.
func (f *fleet) resolve(ctx context.Context) error {
	for _, k := range f.kids {
		if k.id != uuid.Nil {
			continue
		}
		err := f.admin.QueryRow(ctx, `SELECT id FROM batchclaim.instances WHERE name = $1`, k.Name).Scan(&k.id)
		if err != nil && !pgdb.NoRows(err) {
			return err
		}
	}
	return nil
}

// spread is who holds the claims: per live instance (lease in phase one), and the free ones.
type spread struct {
	held     map[uuid.UUID]int
	free     int
	lo, hi   int
	heldLive int
}

func readSpread(ctx context.Context, q *pgxpool.Pool) (spread, error) {
	s := spread{held: map[uuid.UUID]int{}}
	rows, err := q.Query(ctx, `SELECT i.id, (SELECT count(*) FROM batchclaim.service_id_claims c WHERE c.claimant = i.id)
		FROM batchclaim.instances i WHERE i.expiry_1 > now()`)
	if err != nil {
		return s, err
	}
	first := true
	for rows.Next() {
		var id uuid.UUID
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			rows.Close()
			return s, err
		}
		s.held[id] = n
		s.heldLive += n
		if first {
			s.lo, s.hi, first = n, n, false
		}
		s.lo, s.hi = min(s.lo, n), max(s.hi, n)
	}
	if err := rows.Err(); err != nil {
		return s, err
	}
	err = q.QueryRow(ctx, `SELECT count(*) FROM batchclaim.service_id_claims WHERE claimant IS NULL`).Scan(&s.free)
	return s, err
}

// balanced: every running process is live, every claim is held by a live instance, and no
// two live instances hold counts that differ by more than one.
func (s spread) balanced(k int, kids []*fleetKid) bool {
	if len(s.held) != len(kids) || s.free != 0 || s.heldLive != k || s.hi-s.lo > 1 {
		return false
	}
	for _, c := range kids {
		if _, ok := s.held[c.id]; !ok || c.id == uuid.Nil {
			return false
		}
	}
	return true
}

// waitBalanced waits until the fleet's claims are balanced over its running processes.
func (f *fleet) waitBalanced(ctx context.Context, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		for _, k := range f.kids {
			if k.Exited() && !k.signalled {
				return fmt.Errorf("%s exited on its own (%v); see %s", k.Name, k.Err, f.logDir)
			}
		}
		if err := f.resolve(ctx); err != nil {
			return err
		}
		s, err := readSpread(ctx, f.admin)
		if err != nil {
			return err
		}
		if s.balanced(f.k, f.running()) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("claims not balanced over %d processes after %s: %d live, %d free, held %d..%d (logs in %s)",
				len(f.running()), limit, len(s.held), s.free, s.lo, s.hi, f.logDir)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// faultRun injects the faults and measures.
type faultRun struct {
	*fleet
	sim     *dltsim.Sim
	admin   *pgxpool.Pool
	timings claims.Timings
	batches int
}

// measure picks a victim and one of its service_ids, injects the fault (idle: SIGKILL, then
// a batch stored; busy: two batches stored, SIGKILL once the first one's POST is held by
// the ledger; sigterm: SIGTERM, then a batch stored) and returns the seconds from the fault
// to the service_id's next POST by another instance, by the database clock. It returns once
// every batch stored so far is finished.
func (fo *faultRun) measure(ctx context.Context, kind string) (float64, error) {
	victim, svc, err := fo.pickVictim(ctx)
	if err != nil {
		return 0, err
	}
	var fault time.Time
	switch kind {
	case "idle":
		if fault, err = fo.signalAt(ctx, victim, syscall.SIGKILL); err != nil {
			return 0, err
		}
		if err := fo.store(ctx, svc, 1); err != nil {
			return 0, err
		}
	case "busy":
		// The next POST is held unanswered until its client goes away (the SIGKILL closes
		// the connection); the ledger does not accept it.
		fo.sim.InjectTimeouts(1, time.Hour)
		defer fo.sim.ClearFaults()
		posts := len(fo.sim.Posts())
		if err := fo.store(ctx, svc, 2); err != nil {
			return 0, err
		}
		if err := fo.waitHeldPOST(ctx, victim, svc, posts); err != nil {
			return 0, err
		}
		if fault, err = fo.signalAt(ctx, victim, syscall.SIGKILL); err != nil {
			return 0, err
		}
	case "sigterm":
		if fault, err = fo.signalAt(ctx, victim, syscall.SIGTERM); err != nil {
			return 0, err
		}
		if err := fo.store(ctx, svc, 1); err != nil {
			return 0, err
		}
	}
	limit := fo.timings.Expiry2 + 10*fo.timings.RenewInterval + 30*time.Second
	secs, err := fo.waitNextPOST(ctx, svc, victim.id, fault, limit)
	if err != nil {
		return 0, err
	}
	select {
	case <-victim.Done():
	case <-time.After(fo.timings.Expiry2 + 15*time.Second):
		return 0, fmt.Errorf("%s did not exit after the signal", victim.Name)
	}
	return secs, fo.waitFinished(ctx, 60*time.Second)
}

// pickVictim picks the oldest running process and the first service_id it holds.
func (fo *faultRun) pickVictim(ctx context.Context) (*fleetKid, string, error) {
	for _, k := range fo.running() {
		var svc string
		err := fo.admin.QueryRow(ctx, `SELECT service_id FROM batchclaim.service_id_claims WHERE claimant = $1 ORDER BY service_id LIMIT 1`, k.id).Scan(&svc)
		if pgdb.NoRows(err) {
			continue
		}
		if err != nil {
			return nil, "", err
		}
		return k, svc, nil
	}
	return nil, "", errors.New("no running instance holds a claim")
}

// signalAt reads the database clock, then signals at once.
func (fo *faultRun) signalAt(ctx context.Context, k *fleetKid, sig syscall.Signal) (time.Time, error) {
	var at time.Time
	if err := fo.admin.QueryRow(ctx, `SELECT now()`).Scan(&at); err != nil {
		return at, err
	}
	k.signalled = true
	return at, k.Signal(sig)
}

// store stores n batches for svc, in one transaction.
func (fo *faultRun) store(ctx context.Context, svc string, n int) error {
	return pgx.BeginFunc(ctx, fo.admin, func(tx pgx.Tx) error {
		for range n {
			fo.batches++
			id, list := dlt.FakeBatch(svc, fo.batches)
			if _, err := ingest.Enqueue(ctx, tx, svc, id, list); err != nil {
				return err
			}
		}
		return nil
	})
}

// waitHeldPOST waits until the victim's POST of svc reached the ledger, which holds it.
func (fo *faultRun) waitHeldPOST(ctx context.Context, victim *fleetKid, svc string, after int) error {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		posts := fo.sim.Posts()
		for _, p := range posts[min(after, len(posts)):] {
			if p.Service == svc && p.Effect == dltsim.EffectTimeout {
				var mine bool
				err := fo.admin.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM batchclaim.batches WHERE service_id = $1 AND claimant = $2 AND state = 'INFLIGHT')`,
					svc, victim.id).Scan(&mine)
				if err != nil {
					return err
				}
				if !mine {
					return fmt.Errorf("the held POST of %s is not %s's", svc, victim.Name)
				}
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return fmt.Errorf("no POST of %s reached the ledger within 30s", svc)
}

// waitNextPOST waits for svc's first POST by an instance other than victim that started
// after fault, and returns the seconds between them (database clock).
func (fo *faultRun) waitNextPOST(ctx context.Context, svc string, victim uuid.UUID, fault time.Time, limit time.Duration) (float64, error) {
	deadline := time.Now().Add(limit)
	for {
		var secs float64
		err := fo.admin.QueryRow(ctx, `SELECT EXTRACT(EPOCH FROM h.at - $3::timestamptz)::float8
			FROM batchclaim.batch_history h JOIN batchclaim.batches b ON b.seq = h.seq
			WHERE b.service_id = $1 AND h.to_state = 'INFLIGHT' AND h.instance_id <> $2 AND h.at > $3 ORDER BY h.at LIMIT 1`, svc, victim, fault).Scan(&secs)
		if err == nil {
			return secs, nil
		}
		if !pgdb.NoRows(err) {
			return 0, err
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("no POST of %s by another instance within %s of the fault", svc, limit)
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// waitFinished waits until every batch stored is COMMITTED or INVALID.
func (fo *faultRun) waitFinished(ctx context.Context, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		var open int
		if err := fo.admin.QueryRow(ctx, `SELECT count(*) FROM batchclaim.batches WHERE state NOT IN ('COMMITTED', 'INVALID')`).Scan(&open); err != nil {
			return err
		}
		if open == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d batches still unfinished after %s", open, limit)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// allListening reports whether every process's HTTP address is known.
func (f *fleet) allListening() bool {
	for _, k := range f.kids {
		if k.listen == "" {
			return false
		}
	}
	return true
}
