package chaos

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batchclaim/batchclaim/cmd/batchclaim/internal/patroni"
	"github.com/batchclaim/batchclaim/migrations"
	"github.com/batchclaim/batchclaim/testkit/pglocal"
	"github.com/batchclaim/batchclaim/testkit/tcpproxy"
)

// dbName is the database a chaos run works in.
const dbName = "batchclaim_chaos"

// servers is the Postgres side of a run: a throwaway primary with a synchronous standby on two
// fixed ports (the roles swap at each failover), or one existing server.
type servers struct {
	own    bool
	addrs  []string // the servers' addresses, in the order instances list them
	dbName string
	admin  string // URL of the server an existing DatabaseURL named (own == false)

	// async: the standby is asynchronous and streams through repl, a proxy that a failover
	// blackholes first, so that the last commits are missing on the new primary (to show
	// what the synchronous standby prevents).
	async bool
	repl  *tcpproxy.Proxy

	// ha is the Patroni cluster of a run with Cluster patroni (own, nodes unused).
	ha *patroni.Cluster

	mu      sync.Mutex
	nodes   [2]*pglocal.Cluster // own: by address index
	primary int                 // own: index of the primary
}

// acquisition is an acquisition seen on a primary just before it was killed.
type acquisition struct {
	service  string
	epoch    int64
	instance uuid.UUID
}

// clusterSettings keep the guarantees across a failover: every commit waits until the standby
// has it (synchronous_commit on, synchronous_standby_names '*' set once the standby
// streams), and commit timestamps order the history.
var clusterSettings = map[string]string{
	"synchronous_commit":           "on",
	"track_commit_timestamp":       "on",
	"wal_receiver_status_interval": "1s",
}

// startServers starts the throwaway primary and its synchronous standby, or prepares a scratch
// database on databaseURL, and migrates the database.
func startServers(ctx context.Context, cfg Config, progress func(string, ...any)) (*servers, error) {
	databaseURL, async := cfg.DatabaseURL, cfg.AsyncStandby
	if databaseURL != "" {
		return externalServer(ctx, databaseURL, progress)
	}
	if cfg.Cluster == ClusterPatroni {
		return patroniServers(ctx, cfg, progress)
	}
	primary, err := pglocal.Start(ctx, pglocal.Options{Settings: clusterSettings})
	if err != nil {
		return nil, fmt.Errorf("start throwaway postgres: %w", err)
	}
	s := &servers{own: true, dbName: dbName, async: async}
	s.nodes[0] = primary
	standby, err := s.newStandby(ctx, primary, 0)
	if err != nil {
		_ = primary.Stop(ctx)
		return nil, fmt.Errorf("start standby: %w", err)
	}
	s.nodes[1] = standby
	s.addrs = []string{hostPort(primary.Port()), hostPort(standby.Port())}
	if err := s.makeSynchronous(ctx); err != nil {
		s.close(ctx)
		return nil, err
	}
	conn, err := pgx.Connect(ctx, primary.URL())
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
	if err := migrations.Up(ctx, s.directURL(s.addrs[0], "")); err != nil {
		s.close(ctx)
		return nil, fmt.Errorf("migrate: %w", err)
	}
	if async {
		progress("postgres: throwaway primary on %s, ASYNCHRONOUS standby on %s: a failover loses the last commits and the guarantees do not hold",
			s.addrs[0], s.addrs[1])
	} else {
		progress("postgres: throwaway primary on %s, synchronous standby on %s (synchronous_commit=on, synchronous_standby_names='*')",
			s.addrs[0], s.addrs[1])
	}
	return s, nil
}

func externalServer(ctx context.Context, databaseURL string, progress func(string, ...any)) (*servers, error) {
	u, err := url.Parse(databaseURL)
	if err != nil || u.Host == "" || strings.Contains(u.Host, ",") {
		return nil, errors.New("DATABASE_URL: want a postgres:// URL naming one host:port")
	}
	host := u.Host
	if u.Port() == "" {
		host = net.JoinHostPort(u.Hostname(), "5432")
	}
	s := &servers{addrs: []string{host}, dbName: fmt.Sprintf("batchclaim_chaos_%d", os.Getpid()), admin: databaseURL}
	conn, err := pgx.Connect(ctx, databaseURL)
	if err != nil {
		return nil, fmt.Errorf("connect to DATABASE_URL: %w", err)
	}
	_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{s.dbName}.Sanitize())
	conn.Close(ctx)
	if err != nil {
		return nil, fmt.Errorf("create scratch database (needs CREATEDB): %w", err)
	}
	if err := migrations.Up(ctx, s.url(s.addrs, "")); err != nil {
		s.close(ctx)
		return nil, fmt.Errorf("migrate: %w", err)
	}
	progress("postgres: DATABASE_URL (%s), scratch database %s; postgres_restart and postgres_failover are skipped: they need a cluster this run owns",
		host, s.dbName)
	return s, nil
}

func hostPort(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }

// url is a URL of the run's database through the given addresses; with several, only a
// read-write server is taken (pgx tries them in order).
func (s *servers) url(addrs []string, appName string) string {
	u := url.URL{Scheme: "postgres", Host: strings.Join(addrs, ","), Path: "/" + s.dbName}
	q := url.Values{}
	if !s.own && s.admin != "" {
		base, _ := url.Parse(s.admin)
		u.User = base.User
		q = base.Query()
	} else {
		u.User = url.User("postgres")
		q.Set("sslmode", "disable")
	}
	if len(addrs) > 1 {
		q.Set("target_session_attrs", "read-write")
	}
	if appName != "" {
		q.Set("application_name", appName)
	}
	u.RawQuery = q.Encode()
	return u.String()
}

func (s *servers) directURL(addr, appName string) string { return s.url([]string{addr}, appName) }

// pool opens the harness's own pool, straight to the servers (no proxy).
func (s *servers) pool(ctx context.Context) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(s.url(s.addrs, "chaos"))
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = 8
	cfg.ConnConfig.ConnectTimeout = 3 * time.Second
	return pgxpool.NewWithConfig(ctx, cfg)
}

// newStandby starts a standby of primary on port (zero: a free one); an asynchronous one
// streams through a new replication proxy.
func (s *servers) newStandby(ctx context.Context, primary *pglocal.Cluster, port int) (*pglocal.Cluster, error) {
	if !s.async {
		return primary.StartStandby(ctx, port)
	}
	if s.repl != nil {
		_ = s.repl.Close()
	}
	repl, err := tcpproxy.Start("127.0.0.1:0", hostPort(primary.Port()))
	if err != nil {
		return nil, err
	}
	s.repl = repl
	return primary.StartStandbyVia(ctx, port, repl.Addr())
}

// makeSynchronous makes the standby synchronous and waits until it is (an asynchronous one:
// until it streams).
func (s *servers) makeSynchronous(ctx context.Context) error {
	p := s.nodes[s.primary]
	if s.async {
		return p.WaitStreaming(ctx, false)
	}
	if err := p.SetSynchronousStandbys(ctx, "*"); err != nil {
		return err
	}
	return p.WaitStreaming(ctx, true)
}

// restart restarts the primary and waits until its standby streams from it again: until
// then a primary with a synchronous standby commits nothing, so the outage lasts until then.
// It returns how long the primary was down and how long until the standby was back.
func (s *servers) restart(ctx context.Context) (down, streaming time.Duration, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	start := time.Now()
	p := s.nodes[s.primary]
	if err := p.Restart(ctx); err != nil {
		return 0, 0, err
	}
	down = time.Since(start)
	if err := p.WaitStreaming(ctx, !s.async); err != nil {
		return down, 0, fmt.Errorf("standby after the restart: %w", err)
	}
	return down, time.Since(start), nil
}

// failover kills the primary, promotes the standby, then makes a new synchronous standby of
// the new primary on the old primary's address. It returns the two steps' durations.
func (s *servers) failover(ctx context.Context) (seen []acquisition, down, rebuilt time.Duration, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	start := time.Now()
	old, next := s.primary, 1-s.primary
	if s.async {
		// Replication stalls; the primary goes on committing what the standby will not have.
		s.repl.Blackhole()
		time.Sleep(asyncLag)
	}
	seen = s.acquisitions(ctx, s.addrs[old])
	if err := s.nodes[old].Kill(ctx); err != nil {
		return seen, 0, 0, err
	}
	if err := s.nodes[next].Promote(ctx); err != nil {
		return seen, 0, 0, err
	}
	s.primary = next
	down = time.Since(start)
	oldPort := s.nodes[old].Port()
	if err := s.nodes[old].Stop(ctx); err != nil {
		return seen, down, 0, err
	}
	standby, err := s.newStandby(ctx, s.nodes[next], oldPort)
	if err != nil {
		return seen, down, 0, fmt.Errorf("new standby: %w", err)
	}
	s.nodes[old] = standby
	if err := s.makeSynchronous(ctx); err != nil {
		return seen, down, 0, err
	}
	return seen, down, time.Since(start), nil
}

// asyncLag is how long an asynchronous standby is held behind before a failover.
const asyncLag = time.Second

// acquisitions reads every acquisition a server has, straight from it; nil when it cannot.
func (s *servers) acquisitions(ctx context.Context, addr string) []acquisition {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.directURL(addr, "chaos"))
	if err != nil {
		return nil
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT service_id, epoch, instance_id FROM batchclaim.claim_events WHERE event = 'acquired'`)
	if err != nil {
		return nil
	}
	defer rows.Close()
	var out []acquisition
	for rows.Next() {
		var a acquisition
		if rows.Scan(&a.service, &a.epoch, &a.instance) == nil {
			out = append(out, a)
		}
	}
	return out
}

// terminate ends every backend of one application_name and returns how many.
func (s *servers) terminate(ctx context.Context, pool *pgxpool.Pool, appName string) (int, error) {
	var n int
	err := pool.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1`, appName).Scan(&n)
	return n, err
}

func (s *servers) close(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if !s.own {
		if conn, err := pgx.Connect(ctx, s.admin); err == nil {
			_, _ = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{s.dbName}.Sanitize()+" WITH (FORCE)")
			conn.Close(ctx)
		}
		return
	}
	if s.ha != nil {
		s.ha.Stop(ctx)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.repl != nil {
		_ = s.repl.Close()
	}
	for _, n := range s.nodes {
		if n != nil {
			_ = n.Stop(ctx)
		}
	}
}
