package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// hogMargin is the connections pool_hog leaves free on the server for everyone else (the
// other instances' redials, the harness).
const hogMargin = 10

// opPoolHog starves one instance's pool while its lease loop goes on, as an embedder whose
// own work holds every connection of the pool it shares with the instance would. The
// instances are processes of their own, so this is done from outside: a holder takes the
// server's connections up to max_connections less hogMargin (the embedder's hunger, felt by
// every client that needs a new connection), the victim's gates refuse every new connection,
// and every backend of the victim except its lease loop's connection is terminated
// (repeatedly, for the whole hog). Its lease stays alive, so nobody may take its claims by
// expiry; it must notice that it cannot work and give its service_ids up. At the end the
// victim is judged as after link_freeze (stalled_work).
func (r *run) opPoolHog(ctx context.Context, rng *rand.Rand) OpRecord {
	rec := OpRecord{Kind: OpPoolHog}
	r.hostMu.Lock()
	defer r.hostMu.Unlock()
	r.settle(ctx, r.cfg.Expiry2+2*time.Second)
	in := r.pickRunning(rng)
	if in == nil {
		rec.Result = "no instance running"
		return rec
	}
	name, _, _ := in.snapshot()
	id := in.lookupID(ctx, r.pool)
	rec.Instance = name
	warm(ctx, r.pool)
	held, err := r.holdConnections(ctx)
	defer func() {
		for _, c := range held {
			_ = c.Close(context.WithoutCancel(ctx))
		}
	}()
	if err != nil {
		rec.Err = err.Error()
	}
	lease := r.leaseBackends(ctx, name)
	for _, g := range in.gates {
		g.refuseNew(true)
	}
	defer func() {
		for _, g := range in.gates {
			g.refuseNew(false)
		}
	}()
	start, err := r.outageStart(ctx)
	if err != nil {
		rec.Result, rec.Err = "no database time", err.Error()
		return rec
	}
	rec.At = start.since
	d := r.cfg.Expiry2 + 2*r.cfg.Expiry1 + time.Duration(rng.IntN(2000))*time.Millisecond
	r.event(OpPoolHog, "%d connections held; %s's pool starved for %.1fs (its lease connection %v kept)", len(held), name, d.Seconds(), lease)
	killed := 0
	for end := time.Now().Add(d); time.Now().Before(end) && ctx.Err() == nil; r.sleep(ctx, 100*time.Millisecond) {
		killed += r.terminateExcept(ctx, name, lease)
	}
	r.judgeStall(ctx, in, id, start, "its pool starved (pool_hog) while its lease went on")
	rec.End, _ = r.dbNow(ctx)
	rec.Result, rec.Acted = fmt.Sprintf("%d connections held for %.1fs; %s's new connections refused and %d of its backends terminated, its lease connection %v kept",
		len(held), d.Seconds(), name, killed, lease), true
	if len(lease) == 0 {
		rec.Result += " (none seen: its lease was starved too)"
	}
	return rec
}

// warm opens every connection the harness's pool may hold, so that it keeps working while
// the server has no connection to spare.
func warm(ctx context.Context, pool *pgxpool.Pool) {
	n := int(pool.Config().MaxConns)
	conns := make([]*pgxpool.Conn, 0, n)
	for range n {
		c, err := pool.Acquire(ctx)
		if err != nil {
			break
		}
		conns = append(conns, c)
	}
	for _, c := range conns {
		c.Release()
	}
}

// holdConnections opens connections to the primary up to max_connections less hogMargin.
func (r *run) holdConnections(ctx context.Context) ([]*pgx.Conn, error) {
	var limit, used int
	qctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	err := r.pool.QueryRow(qctx, `SELECT current_setting('max_connections')::int, (SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend')`).Scan(&limit, &used)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("count connections: %w", err)
	}
	var held []*pgx.Conn
	for range min(max(limit-used-hogMargin, 0), 500) {
		cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		c, err := pgx.Connect(cctx, r.db.url(r.db.addrs, "chaos-hog"))
		cancel()
		if err != nil {
			return held, fmt.Errorf("hold connection %d: %w", len(held)+1, err)
		}
		held = append(held, c)
	}
	return held, nil
}

// leaseBackends returns the backends of an instance whose last statement was a renewal of
// its lease, watched for a second (the lease loop renews every R on a connection of its own).
func (r *run) leaseBackends(ctx context.Context, name string) []int32 {
	var pids []int32
	for end := time.Now().Add(time.Second); time.Now().Before(end) && ctx.Err() == nil; r.sleep(ctx, 20*time.Millisecond) {
		qctx, cancel := context.WithTimeout(ctx, time.Second)
		rows, err := r.pool.Query(qctx, `SELECT pid FROM pg_stat_activity WHERE application_name = $1 AND query LIKE '-- name: InstanceHeartbeat%'`, name)
		if err == nil {
			for rows.Next() {
				var pid int32
				if rows.Scan(&pid) == nil && !containsPID(pids, pid) {
					pids = append(pids, pid)
				}
			}
			rows.Close()
		}
		cancel()
	}
	return pids
}

func containsPID(pids []int32, pid int32) bool {
	for _, p := range pids {
		if p == pid {
			return true
		}
	}
	return false
}

// terminateExcept terminates every backend of an instance but the given ones and returns
// how many.
func (r *run) terminateExcept(ctx context.Context, name string, keep []int32) int {
	qctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	var n int
	if keep == nil {
		keep = []int32{}
	}
	_ = r.pool.QueryRow(qctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1 AND pid <> ALL($2)`, name, keep).Scan(&n)
	return n
}

// opLongSnapshot opens a REPEATABLE READ transaction, reads from it (which takes its
// snapshot) and keeps it open for 2-4 minutes, or until the run has quiesced: no dead row
// version newer than the snapshot can be vacuumed meanwhile, so they pile up in batches,
// the claims and the registry, and every statement reads past them. A fault that ends its
// connection (a restart, a failover) ends the snapshot; another is taken at once.
func (r *run) opLongSnapshot(ctx context.Context, rng *rand.Rand) OpRecord {
	rec := OpRecord{Kind: OpLongSnapshot}
	if !r.snapOpen.CompareAndSwap(false, true) {
		rec.Result = "a snapshot is open already"
		return rec
	}
	s, n, err := r.openSnapshot(ctx)
	if err != nil {
		r.snapOpen.Store(false)
		rec.Result, rec.Err = "no snapshot taken", err.Error()
		return rec
	}
	rec.At = s.at
	hold := 2*time.Minute + time.Duration(rng.IntN(120))*time.Second
	dead := r.deadTuples(ctx)
	r.snaps.Go(func() { r.holdSnapshot(ctx, s, hold, dead) })
	rec.Result, rec.Acted = fmt.Sprintf("REPEATABLE READ snapshot taken (%d batches in it), held up to %v or until the run quiesced; dead row versions: %s", n, hold, dead), true
	return rec
}

// snapshot is an open REPEATABLE READ transaction and when it began (database clock).
type snapshot struct {
	conn *pgx.Conn
	tx   pgx.Tx
	at   time.Time
}

func (s snapshot) close(ctx context.Context) {
	_ = s.tx.Rollback(ctx)
	_ = s.conn.Close(ctx)
}

// openSnapshot begins a REPEATABLE READ transaction on a connection of its own and takes its
// snapshot; it returns the number of batches the snapshot holds.
func (r *run) openSnapshot(ctx context.Context) (snapshot, int, error) {
	var s snapshot
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var err error
	if s.conn, err = pgx.Connect(cctx, r.db.url(r.db.addrs, "chaos-snapshot")); err != nil {
		return s, 0, err
	}
	var n int
	if s.tx, err = s.conn.BeginTx(cctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead}); err == nil {
		err = s.tx.QueryRow(cctx, `SELECT now(), count(*) FROM batchclaim.batches`).Scan(&s.at, &n)
	}
	if err != nil {
		_ = s.conn.Close(context.WithoutCancel(ctx))
		return s, 0, err
	}
	return s, n, nil
}

// holdSnapshot keeps the snapshot open until hold has passed or the run quiesced, taking a
// new one whenever a fault ends its connection, and then records how it went.
func (r *run) holdSnapshot(ctx context.Context, s snapshot, hold time.Duration, dead string) {
	defer r.snapOpen.Store(false)
	began, reopened, open := time.Now(), 0, true
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for wait := true; wait && time.Since(began) < hold; {
		select {
		case <-r.snapStop:
			wait = false
			continue
		case <-ctx.Done():
			wait = false
			continue
		case <-t.C:
		}
		var one int
		if open && s.tx.QueryRow(ctx, `SELECT 1`).Scan(&one) == nil {
			continue
		}
		if open {
			s.close(context.WithoutCancel(ctx))
		}
		ns, _, err := r.openSnapshot(ctx)
		if open = err == nil; open {
			s, reopened = ns, reopened+1
		}
	}
	end := OpRecord{Kind: OpLongSnapshot, At: s.at, Result: fmt.Sprintf("snapshot released after %.0fs (taken anew %d times after a fault ended its connection); dead row versions then: %s (at its start: %s)",
		time.Since(began).Seconds(), reopened, r.deadTuples(ctx), dead)}
	if open {
		if err := s.tx.Commit(context.WithoutCancel(ctx)); err != nil {
			end.Err = err.Error()
		}
		_ = s.conn.Close(context.WithoutCancel(ctx))
	}
	end.End, _ = r.dbNow(context.WithoutCancel(ctx))
	r.note(end)
}

func (r *run) snapshotOpen() bool { return r.snapOpen.Load() }

// deadTuples describes the dead row versions the statistics count in the busiest tables.
func (r *run) deadTuples(ctx context.Context) string {
	qctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	rows, err := r.pool.Query(qctx, `SELECT relname, n_dead_tup FROM pg_stat_user_tables
		WHERE schemaname = 'batchclaim' AND relname IN ('batches', 'service_id_claims', 'instances') ORDER BY relname`)
	if err != nil {
		return "unknown"
	}
	defer rows.Close()
	var cells []string
	for rows.Next() {
		var rel string
		var n int64
		if rows.Scan(&rel, &n) == nil {
			cells = append(cells, fmt.Sprintf("%s %d", rel, n))
		}
	}
	return strings.Join(cells, ", ")
}
