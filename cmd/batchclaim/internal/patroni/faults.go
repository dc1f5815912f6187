package patroni

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// KillPostmaster SIGKILLs m's postmaster, as a crash would. On the leader, Patroni (with
// primary_start_timeout 0) gives up the leader key and a synchronous standby is promoted; the
// old leader then rejoins as a replica, through pg_rewind when its timeline diverged.
func (c *Cluster) KillPostmaster(ctx context.Context, m *Member) error {
	return m.killPostmaster(ctx)
}

// KillPatroni SIGKILLs m's Patroni process alone; its Postgres keeps running without a
// manager. A killed leader's key expires after ttl and a standby is promoted; its Postgres,
// still a primary, commits nothing in synchronous mode (its synchronous standby is gone),
// until StartPatroni brings its manager back, which demotes it.
func (c *Cluster) KillPatroni(m *Member) error { return m.killPatroni() }

// StartPatroni starts m's Patroni again after KillPatroni, as a supervisor would.
func (c *Cluster) StartPatroni(m *Member) error {
	if err := m.start(); err != nil {
		return err
	}
	m.mu.Lock()
	m.restarts++
	m.mu.Unlock()
	return nil
}

// Switchover asks Patroni for a planned switchover from the current leader to candidate
// (empty: Patroni picks one), with patronictl.
func (c *Cluster) Switchover(ctx context.Context, leader, candidate *Member) error {
	args := []string{"switchover", "--leader", leader.Name, "--force"}
	if candidate != nil {
		args = append(args, "--candidate", candidate.Name)
	}
	return c.patronictl(ctx, args...)
}

// Failover asks Patroni for a manual failover to candidate with patronictl.
func (c *Cluster) Failover(ctx context.Context, candidate *Member) error {
	return c.patronictl(ctx, "failover", "--candidate", candidate.Name, "--force")
}

func (c *Cluster) patronictl(ctx context.Context, args ...string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.bins.Patronictl, append([]string{"-c", c.ctlConfig()}, args...)...)
	cmd.Env = append(cmd.Environ(), "HOME="+c.dir, "LC_ALL=C.UTF-8")
	out, err := cmd.CombinedOutput()
	text := strings.TrimSpace(string(out))
	if err != nil {
		return fmt.Errorf("patronictl %s: %w: %s", strings.Join(args, " "), err, text)
	}
	// patronictl exits 0 after some refusals; its answer says whether it happened.
	if !strings.Contains(text, "Successfully") {
		return fmt.Errorf("patronictl %s: %s", strings.Join(args, " "), text)
	}
	return nil
}

// CutDCS cuts m's link to etcd (every connection closed, new ones refused) until RestoreDCS.
// A leader that cannot update its key within retry_timeout demotes itself; the others elect
// a new leader once the key expires (ttl).
func (c *Cluster) CutDCS(m *Member) { m.dcs.Cut() }

// RestoreDCS gives m its link to etcd back.
func (c *Cluster) RestoreDCS(m *Member) { m.dcs.Restore() }

// StopEtcd stops etcd (SIGKILL when kill is set, else SIGTERM). Without a DCS no member can
// keep or take the leader key: the leader demotes itself after retry_timeout, and nobody
// accepts writes until StartEtcd.
func (c *Cluster) StopEtcd(kill bool) error { return c.etcd.stop(kill) }

// StartEtcd starts etcd again on its address and data.
func (c *Cluster) StartEtcd(ctx context.Context) error { return c.etcd.start(ctx) }

// Diverge commits one row on m alone (synchronous_commit local), in database postgres: on a
// former leader that runs on unmanaged after a standby was promoted, this forks its history
// from the new leader's, so that it can rejoin only through pg_rewind, which discards the
// row.
func (c *Cluster) Diverge(ctx context.Context, m *Member) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.DirectURL(m, "postgres"))
	if err != nil {
		return fmt.Errorf("diverge %s: %w", m.Name, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	_, err = conn.Exec(ctx, `SET synchronous_commit = local;
		CREATE TABLE IF NOT EXISTS harness_writes (at timestamptz NOT NULL DEFAULT now());
		INSERT INTO harness_writes DEFAULT VALUES`)
	if err != nil {
		return fmt.Errorf("diverge %s: %w", m.Name, err)
	}
	return nil
}
