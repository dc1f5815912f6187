package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/batchclaim/batchclaim/cmd/batchclaim/internal/patroni"
	"github.com/batchclaim/batchclaim/migrations"
	"github.com/batchclaim/batchclaim/testkit/pgsource"
)

// patroniServers starts etcd and three Patroni members in synchronous_mode and creates and
// migrates the run's database through the multi-host URL.
func patroniServers(ctx context.Context, cfg Config, progress func(string, ...any)) (*servers, error) {
	progress("postgres: starting etcd and three Patroni members (synchronous_mode strict, use_pg_rewind, ttl 10s, loop_wait 1s)")
	start := time.Now()
	ha, err := patroni.Start(ctx, patroni.Options{KeepDir: cfg.LogDir != "", Logger: cfg.Logger})
	if err != nil {
		return nil, fmt.Errorf("start patroni cluster: %w", err)
	}
	s := &servers{own: true, dbName: dbName, ha: ha, addrs: ha.Addrs()}
	conn, err := pgx.Connect(ctx, ha.URL("postgres"))
	if err != nil {
		s.close(ctx)
		return nil, err
	}
	_, err = conn.Exec(ctx, "CREATE DATABASE "+dbName)
	conn.Close(ctx)
	if err != nil {
		s.close(ctx)
		return nil, fmt.Errorf("create database: %w", err)
	}
	if err := pgsource.WaitDatabase(ctx, s.url(s.addrs, "")); err != nil {
		s.close(ctx)
		return nil, err
	}
	if err := migrations.Up(ctx, s.url(s.addrs, "")); err != nil {
		s.close(ctx)
		return nil, fmt.Errorf("migrate: %w", err)
	}
	leader, _ := ha.Leader(ctx)
	name := "?"
	if leader != nil {
		name = leader.Name
	}
	progress("postgres: Patroni cluster up in %.1fs (members %v, leader %s; logs in %s)", time.Since(start).Seconds(), ha.Addrs(), name, ha.Dir())
	return s, nil
}

// LeaderTakeover is what a fault of the Patroni leader (or of etcd) cost: when a leader
// accepted writes again, and when every claim held at the fault was held again by a live
// instance (its owner back, or another that took it).
type LeaderTakeover struct {
	Kind string `json:"kind"`
	From string `json:"from"` // the leader at the fault
	To   string `json:"to"`   // the leader that accepted writes next
	// WritableAfter: seconds from the fault until the new leader committed a write.
	WritableAfter float64 `json:"writable_after_s"`
	// Claims judged, and the slowest of them: seconds from the fault, and from the moment
	// the new leader accepted writes, until a live instance held it again.
	Claims             int     `json:"claims"`
	SlowestAfterFault  float64 `json:"slowest_after_fault_s"`
	SlowestAfterWrites float64 `json:"slowest_after_writable_s"`
	// Bound: seconds after the new leader accepted writes by which every claim must be held
	// again: T2 + 2R + allowance. FaultBound, for a killed leader (postmaster or Patroni):
	// seconds after the fault, Patroni's ttl + loop_wait plus Bound.
	Bound      float64 `json:"bound_s"`
	FaultBound float64 `json:"fault_bound_s,omitempty"`
}

// leaderFault injects one fault of the Patroni cluster's leader (or of etcd), waits until a
// leader accepts writes, then until every claim held at the fault is held by a live instance
// again (judged against T2 + 2R + allowance from the moment the new leader accepted writes),
// then until the cluster is whole again.
func (r *run) leaderFault(ctx context.Context, kind string, rng *rand.Rand) error {
	ha := r.db.ha
	leader, err := ha.Leader(ctx)
	if err != nil {
		return err
	}
	held := r.claimsHeld(ctx)
	seen := r.db.acquisitions(ctx, leader.Addr())
	r.mu.Lock()
	r.beforeFailover = append(r.beforeFailover, seen...)
	r.mu.Unlock()
	r.count(kind)
	start := time.Now()
	exclude := leader.Name
	var what string
	switch kind {
	case KindPatroniKillPostmaster:
		err = ha.KillPostmaster(ctx, leader)
		what = "leader's postmaster killed (SIGKILL)"
	case KindPatroniKillPatroni:
		err = ha.KillPatroni(leader)
		what = "leader's Patroni killed (SIGKILL); its Postgres runs on unmanaged"
	case KindPatroniSwitchover:
		err = ha.Switchover(ctx, leader, nil)
		what = "patronictl switchover"
	case KindPatroniFailover:
		what, err = r.failoverToStandby(ctx, leader)
	case KindPatroniDCSCut:
		ha.CutDCS(leader)
		what = "leader cut from etcd"
	case KindEtcdRestart:
		exclude = ""
		if err = ha.StopEtcd(true); err == nil {
			down := time.Duration(2000+rng.IntN(8000)) * time.Millisecond
			r.event(kind, "etcd killed for %.1fs", down.Seconds())
			r.sleep(ctx, down)
			err = ha.StartEtcd(ctx)
		}
		what = "etcd killed and started again"
	}
	if err != nil {
		return fmt.Errorf("%s: %w", kind, err)
	}
	r.event(kind, "%s (leader %s)", what, leader.Name)
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	next, writable, err := ha.WaitWritable(wctx, exclude)
	if err != nil {
		return fmt.Errorf("%s: %w", kind, err)
	}
	r.event(kind, "%s accepts writes %.1fs after the fault", next.Name, writable.Sub(start).Seconds())
	switch kind {
	case KindPatroniKillPatroni:
		// The old leader took writes its standbys never saw (Diverge makes sure of one):
		// its Patroni, restarted as a supervisor would, must rewind it to rejoin.
		if err := ha.Diverge(ctx, leader); err != nil {
			r.say("%s: %v", kind, err)
		}
		r.sleep(ctx, time.Second)
		if err := ha.StartPatroni(leader); err != nil {
			return err
		}
	case KindPatroniDCSCut:
		ha.RestoreDCS(leader)
	}
	t := r.awaitClaims(wctx, held, start, writable)
	t.Kind, t.From, t.To = kind, leader.Name, next.Name
	if kind == KindPatroniKillPostmaster || kind == KindPatroniKillPatroni {
		ttl, loop, _ := ha.Timing()
		t.FaultBound = (ttl + loop).Seconds() + t.Bound
		if t.SlowestAfterFault > t.FaultBound {
			r.mu.Lock()
			r.slowLeader = append(r.slowLeader, fmt.Sprintf("%s: the last claim held at the fault was held by a live instance again %.1fs after the fault (bound ttl + loop_wait + T2 + 2R + allowance = %.1fs)",
				kind, t.SlowestAfterFault, t.FaultBound))
			r.mu.Unlock()
		}
	}
	r.mu.Lock()
	r.leaderTakeovers = append(r.leaderTakeovers, t)
	r.mu.Unlock()
	r.event(kind, "%d claims held again by live instances %.1fs after the fault, %.1fs after writes resumed (bound %.1fs)",
		t.Claims, t.SlowestAfterFault, t.SlowestAfterWrites, t.Bound)
	rewinds := ha.Rewinds()
	if _, err := ha.WaitHealthy(wctx); err != nil {
		return fmt.Errorf("%s: cluster not whole again: %w", kind, err)
	}
	r.event(kind, "cluster whole again %.1fs after the fault (pg_rewind runs so far: %d)", time.Since(start).Seconds(), rewinds)
	return nil
}

// failoverToStandby asks patronictl to fail over to the plain replica, which synchronous_mode
// must refuse, then to the synchronous standby.
func (r *run) failoverToStandby(ctx context.Context, leader *patroni.Member) (string, error) {
	st, err := r.db.ha.State(ctx)
	if err != nil {
		return "", err
	}
	var sync, replica *patroni.Member
	for _, s := range st {
		switch s.Role {
		case "sync_standby":
			sync = r.db.ha.Member(s.Name)
		case "replica":
			replica = r.db.ha.Member(s.Name)
		}
	}
	if sync == nil {
		return "", fmt.Errorf("no synchronous standby to fail over to")
	}
	what := "patronictl failover to the synchronous standby " + sync.Name
	if replica != nil {
		if err := r.db.ha.Failover(ctx, replica); err == nil {
			r.problem("patronictl failover to the asynchronous replica %s was carried out in synchronous_mode", replica.Name)
			return "patronictl failover to the asynchronous replica " + replica.Name, nil
		}
		what += " (refused first, as synchronous_mode must: the asynchronous replica " + replica.Name + ")"
	}
	return what, r.db.ha.Failover(ctx, sync)
}

// liveClaim is a claim held when a leader fault hit.
type liveClaim struct {
	service string
	work    bool
}

// claimsHeld reads the claims held now (with whether their service_id has unfinished work).
func (r *run) claimsHeld(ctx context.Context) []liveClaim {
	qctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	rows, err := r.pool.Query(qctx, `SELECT c.service_id,
		EXISTS (SELECT 1 FROM batchclaim.batches b WHERE b.service_id = c.service_id AND b.unfinished)
		FROM batchclaim.service_id_claims c WHERE c.claimant IS NOT NULL`)
	if err != nil {
		return nil
	}
	defer rows.Close()
	var out []liveClaim
	for rows.Next() {
		var c liveClaim
		if rows.Scan(&c.service, &c.work) == nil {
			out = append(out, c)
		}
	}
	return out
}

// awaitClaims polls, from the moment the new leader accepted writes, until every claim held
// at the fault is held by an instance whose lease is in phase one, and judges the slowest
// against T2 + 2R + allowance from that moment. With idle rows dropped (--drop-idle-after,
// or from drop_idle_on on) only claims with unfinished work are judged (an idle one may be
// dropped instead), and one whose row was dropped meanwhile (its work finished under its
// owner) is not waited for.
func (r *run) awaitClaims(ctx context.Context, held []liveClaim, fault, writable time.Time) LeaderTakeover {
	c := r.cfg
	bound := c.Expiry2 + 2*c.Renew + c.Allowance
	t := LeaderTakeover{WritableAfter: writable.Sub(fault).Seconds(), Bound: bound.Seconds()}
	waiting := map[string]bool{}
	for _, h := range held {
		if r.dropIdleAfter() == 0 || h.work {
			waiting[h.service] = true
		}
	}
	t.Claims = len(waiting)
	deadline := writable.Add(bound + 30*time.Second)
	last := writable
	for len(waiting) > 0 && time.Now().Before(deadline) && ctx.Err() == nil {
		var svcs []string
		for s := range waiting {
			svcs = append(svcs, s)
		}
		qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		rows, err := r.pool.Query(qctx, `SELECT s.service_id, c.service_id IS NULL FROM unnest($1::text[]) AS s(service_id)
			LEFT JOIN batchclaim.service_id_claims c ON c.service_id = s.service_id
			LEFT JOIN batchclaim.instances i ON i.id = c.claimant
			WHERE c.service_id IS NULL OR i.expiry_1 > now()`, svcs)
		if err == nil {
			for rows.Next() {
				var s string
				var dropped bool
				if rows.Scan(&s, &dropped) != nil || !waiting[s] {
					continue
				}
				// A row gone was dropped as idle: its work finished under its owner, and
				// there is nothing to take over (only dropping deletes a claim row).
				delete(waiting, s)
				if !dropped {
					last = time.Now()
				}
			}
			rows.Close()
		}
		cancel()
		if len(waiting) > 0 {
			r.sleep(ctx, 100*time.Millisecond)
		}
	}
	t.SlowestAfterFault, t.SlowestAfterWrites = last.Sub(fault).Seconds(), last.Sub(writable).Seconds()
	if len(waiting) > 0 {
		t.SlowestAfterFault, t.SlowestAfterWrites = -1, -1
		r.mu.Lock()
		r.slowLeader = append(r.slowLeader, fmt.Sprintf("%d claims held at the fault were not held by a live instance %.0fs after the new leader accepted writes (bound %.1fs)",
			len(waiting), (bound+30*time.Second).Seconds(), bound.Seconds()))
		r.mu.Unlock()
	} else if last.Sub(writable) > bound {
		r.mu.Lock()
		r.slowLeader = append(r.slowLeader, fmt.Sprintf("the last claim held at the fault was held by a live instance again %.1fs after the new leader accepted writes (bound T2 + 2R + allowance = %.1fs)",
			last.Sub(writable).Seconds(), bound.Seconds()))
		r.mu.Unlock()
	}
	return t
}
