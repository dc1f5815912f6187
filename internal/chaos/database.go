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

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batchclaim/batchclaim/internal/pglocal"
	"github.com/batchclaim/batchclaim/migrations"
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

	mu      sync.Mutex
	nodes   [2]*pglocal.Cluster // own: by address index
	primary int                 // own: index of the primary
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
func startServers(ctx context.Context, databaseURL string, progress func(string, ...any)) (*servers, error) {
	if databaseURL != "" {
		return externalServer(ctx, databaseURL, progress)
	}
	primary, err := pglocal.Start(ctx, pglocal.Options{Settings: clusterSettings})
	if err != nil {
		return nil, fmt.Errorf("start throwaway postgres: %w", err)
	}
	s := &servers{own: true, dbName: dbName}
	s.nodes[0] = primary
	standby, err := primary.StartStandby(ctx, 0)
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
	progress("postgres: throwaway primary on %s, synchronous standby on %s (synchronous_commit=on, synchronous_standby_names='*')",
		s.addrs[0], s.addrs[1])
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

// makeSynchronous makes the standby synchronous and waits until it is.
func (s *servers) makeSynchronous(ctx context.Context) error {
	p := s.nodes[s.primary]
	if err := p.SetSynchronousStandbys(ctx, "*"); err != nil {
		return err
	}
	return p.WaitStreaming(ctx, true)
}

// restart restarts the primary.
func (s *servers) restart(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.nodes[s.primary].Restart(ctx)
}

// failover kills the primary, promotes the standby, then makes a new synchronous standby of
// the new primary on the old primary's address. It returns the two steps' durations.
func (s *servers) failover(ctx context.Context) (down, rebuilt time.Duration, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	start := time.Now()
	old, next := s.primary, 1-s.primary
	if err := s.nodes[old].Kill(ctx); err != nil {
		return 0, 0, err
	}
	if err := s.nodes[next].Promote(ctx); err != nil {
		return 0, 0, err
	}
	s.primary = next
	down = time.Since(start)
	oldPort := s.nodes[old].Port()
	if err := s.nodes[old].Stop(ctx); err != nil {
		return down, 0, err
	}
	standby, err := s.nodes[next].StartStandby(ctx, oldPort)
	if err != nil {
		return down, 0, fmt.Errorf("new standby: %w", err)
	}
	s.nodes[old] = standby
	if err := s.makeSynchronous(ctx); err != nil {
		return down, 0, err
	}
	return down, time.Since(start), nil
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
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range s.nodes {
		if n != nil {
			_ = n.Stop(ctx)
		}
	}
}
