package pglocal

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// settingFlags turns settings into name=value strings in a stable order.
func settingFlags(settings map[string]string) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(settings)) {
		out = append(out, k+"="+settings[k])
	}
	return out
}

// StartStandby creates a streaming replica of c in a new temporary directory with
// pg_basebackup -R (a copy of c's data that starts in standby mode, with primary_conninfo
// pointing at c) and starts it on port (zero: a free one) with the same settings as c. It
// returns once the standby accepts connections. The standby never waits for a standby of its
// own after promotion: synchronous_standby_names is reset in its configuration; a caller that
// wants synchronous replication from it again attaches a new standby and calls
// SetSynchronousStandbys. Stop removes it.
func (c *Cluster) StartStandby(ctx context.Context, port int) (*Cluster, error) {
	return c.StartStandbyVia(ctx, port, "")
}

// StartStandbyVia is StartStandby copying from, and then streaming from, via (host:port, e.g.
// a TCP proxy in front of c, so that a test can cut or hold the replication link); empty
// means c's own address.
func (c *Cluster) StartStandbyVia(ctx context.Context, port int, via string) (*Cluster, error) {
	host, srcPort := "127.0.0.1", strconv.Itoa(c.port)
	if via != "" {
		h, p, err := net.SplitHostPort(via)
		if err != nil {
			return nil, fmt.Errorf("standby source %q: %w", via, err)
		}
		host, srcPort = h, p
	}
	dir, err := os.MkdirTemp("", "batchclaim-pg-standby-")
	if err != nil {
		return nil, fmt.Errorf("create standby directory: %w", err)
	}
	s := &Cluster{bin: c.bin, dir: dir, data: filepath.Join(dir, "data"), log: c.log, cred: c.cred, port: port, settings: c.settings}
	fail := func(err error) (*Cluster, error) {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	if s.cred != nil {
		if err := os.Chown(dir, int(s.cred.Uid), int(s.cred.Gid)); err != nil {
			return fail(fmt.Errorf("hand standby directory to uid %d: %w", s.cred.Uid, err))
		}
	}
	if err := s.run(ctx, "pg_basebackup", "-D", s.data, "-h", host, "-p", srcPort, "-U", "postgres",
		"-R", "-X", "stream", "-c", "fast", "--no-sync"); err != nil {
		return fail(fmt.Errorf("pg_basebackup: %w", err))
	}
	// Later lines of postgresql.auto.conf win: a promoted standby must not wait for one. A
	// standby whose primary restarted tries again to stream after wal_retrieve_retry_interval
	// (5s by default), and a primary with a synchronous standby commits nothing meanwhile:
	// retry soon, so that a restart is a short outage (docs/operations.md advises the same).
	auto, err := os.OpenFile(filepath.Join(s.data, "postgresql.auto.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return fail(fmt.Errorf("standby configuration: %w", err))
	}
	_, err = auto.WriteString("synchronous_standby_names = ''\nwal_retrieve_retry_interval = '100ms'\n")
	if cerr := auto.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fail(fmt.Errorf("standby configuration: %w", err))
	}
	for attempt := 1; ; attempt++ {
		if port == 0 {
			if s.port, err = FreePort(); err != nil {
				return fail(err)
			}
		}
		err = s.start(ctx)
		if err == nil || attempt == portAttempts || port != 0 || !errors.Is(err, errPortTaken) {
			break
		}
	}
	if err != nil {
		return fail(err)
	}
	c.log.Info("throwaway standby started", "dir", dir, "port", s.port, "primary_port", c.port)
	return s, nil
}

// WaitStreaming waits until a standby streams from c and, when sync is true, is its
// synchronous standby.
func (c *Cluster) WaitStreaming(ctx context.Context, sync bool) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	for {
		n, err := c.queryInt(ctx, `SELECT count(*) FROM pg_stat_replication
			WHERE state = 'streaming' AND (NOT $1 OR sync_state IN ('sync', 'quorum'))`, sync)
		if err == nil && n > 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no standby streaming from port %d (sync %t): %w (last error: %v)", c.port, sync, ctx.Err(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// SetSynchronousStandbys sets synchronous_standby_names (e.g. "*": any standby; "": none)
// with ALTER SYSTEM and reloads the configuration.
func (c *Cluster) SetSynchronousStandbys(ctx context.Context, names string) error {
	conn, err := pgx.Connect(ctx, c.URL())
	if err != nil {
		return fmt.Errorf("set synchronous standbys: %w", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "ALTER SYSTEM SET synchronous_standby_names = "+quoteLiteral(names)); err != nil {
		return fmt.Errorf("set synchronous standbys: %w", err)
	}
	if _, err := conn.Exec(ctx, "SELECT pg_reload_conf()"); err != nil {
		return fmt.Errorf("set synchronous standbys: reload: %w", err)
	}
	return nil
}

// Promote turns a standby into a primary (pg_ctl promote) and returns once it accepts
// writes.
func (c *Cluster) Promote(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.proc == nil {
		return errors.New("promote: server not running")
	}
	if err := c.run(ctx, "pg_ctl", "-D", c.data, "-w", "-t", strconv.Itoa(int(readyTimeout/time.Second)), "promote"); err != nil {
		return fmt.Errorf("promote: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	for {
		n, err := c.queryInt(ctx, `SELECT CASE WHEN pg_is_in_recovery() THEN 1 ELSE 0 END`)
		if err == nil && n == 0 {
			c.log.Info("throwaway standby promoted", "port", c.port)
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("promote: still in recovery: %w (last error: %v)", ctx.Err(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Kill stops the server at once, as a crash would: SIGKILL to the postmaster and every
// backend. The data directory stays until Stop; Restart would run crash recovery.
func (c *Cluster) Kill(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.proc
	if p == nil {
		return nil
	}
	c.proc = nil
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	select {
	case <-p.done:
	case <-ctx.Done():
		return fmt.Errorf("kill: %w", ctx.Err())
	case <-time.After(stopTimeout):
		return fmt.Errorf("kill: postgres (pid %d) survived SIGKILL", p.cmd.Process.Pid)
	}
	// Backends in the process group die with the postmaster's group signal; wait until none
	// holds the port so that a new server can take it.
	deadline := time.Now().Add(stopTimeout)
	for syscall.Kill(-p.cmd.Process.Pid, 0) == nil && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	c.log.Info("throwaway postgres killed", "port", c.port)
	return nil
}

// Running reports whether the server was started and not stopped or killed since.
func (c *Cluster) Running() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.proc != nil
}

func (c *Cluster) queryInt(ctx context.Context, sql string, args ...any) (int64, error) {
	qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	conn, err := pgx.Connect(qctx, c.URL())
	if err != nil {
		return 0, err
	}
	defer conn.Close(qctx)
	var n int64
	err = conn.QueryRow(qctx, sql, args...).Scan(&n)
	return n, err
}

func quoteLiteral(s string) string {
	out := []byte{'\''}
	for i := 0; i < len(s); i++ {
		if s[i] == '\'' {
			out = append(out, '\'')
		}
		out = append(out, s[i])
	}
	return string(append(out, '\''))
}
