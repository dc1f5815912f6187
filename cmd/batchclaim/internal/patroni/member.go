package patroni

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/batchclaim/batchclaim/testkit/pglocal"
	"github.com/batchclaim/batchclaim/testkit/tcpproxy"
)

// Member is one Patroni member: a Patroni process and the Postgres it manages, reaching etcd
// through a proxy of its own (so that one member alone can be cut from the DCS).
type Member struct {
	// Name is the member's Patroni name (m1, m2, m3).
	Name string
	// PGPort is its Postgres port and APIPort its Patroni REST API port, both on 127.0.0.1.
	PGPort, APIPort int

	c        *Cluster
	dir      string
	dcs      *tcpproxy.Proxy
	mu       sync.Mutex
	proc     *process // the Patroni process; nil while killed
	restarts int
}

// Addr is the member's Postgres address, host:port.
func (m *Member) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(m.PGPort)) }

// LogPath is the file the member's Patroni (and so its Postgres, which logs to stderr) writes.
func (m *Member) LogPath() string { return filepath.Join(m.dir, "patroni.log") }

func (m *Member) configPath() string { return filepath.Join(m.dir, "patroni.yml") }

func (m *Member) dataDir() string { return filepath.Join(m.dir, "data") }

func newMember(c *Cluster, i int) (*Member, error) {
	m := &Member{Name: fmt.Sprintf("m%d", i+1), c: c, dir: filepath.Join(c.dir, fmt.Sprintf("m%d", i+1))}
	if err := os.MkdirAll(m.dir, 0o755); err != nil {
		return nil, err
	}
	if c.cred != nil {
		if err := os.Chown(m.dir, int(c.cred.Uid), int(c.cred.Gid)); err != nil {
			return nil, fmt.Errorf("hand %s to uid %d: %w", m.dir, c.cred.Uid, err)
		}
	}
	var err error
	if m.PGPort, err = pglocal.FreePort(); err != nil {
		return nil, err
	}
	if m.APIPort, err = pglocal.FreePort(); err != nil {
		return nil, err
	}
	if m.dcs, err = tcpproxy.Start("127.0.0.1:0", c.etcd.addr()); err != nil {
		return nil, err
	}
	if err := m.writeConfig(); err != nil {
		_ = m.dcs.Close()
		return nil, err
	}
	return m, nil
}

// writeConfig writes the member's Patroni configuration. JSON is YAML, so no YAML library is
// needed.
func (m *Member) writeConfig() error {
	o := m.c.opts
	secs := func(d time.Duration) int { return int(d / time.Second) }
	params := map[string]string{
		"max_connections":              "200",
		"shared_buffers":               "32MB",
		"fsync":                        "off", // the machine does not crash in these tests, only processes
		"track_commit_timestamp":       "on",
		"wal_receiver_status_interval": "1s",
		"wal_retrieve_retry_interval":  "100ms",
		"max_wal_senders":              "10",
		"max_replication_slots":        "10",
		"wal_keep_size":                "128MB",
	}
	for k, v := range o.Parameters {
		params[k] = v
	}
	auth := map[string]string{"username": "postgres", "password": "postgres"}
	cfg := map[string]any{
		"scope": scope,
		"name":  m.Name,
		"log":   map[string]any{"level": "INFO"},
		"restapi": map[string]any{
			"listen":          net.JoinHostPort("127.0.0.1", strconv.Itoa(m.APIPort)),
			"connect_address": net.JoinHostPort("127.0.0.1", strconv.Itoa(m.APIPort)),
		},
		// use_proxies: the host is the member's own proxy; Patroni must not discover etcd's
		// real address from the member list and go around it.
		"etcd3": map[string]any{"hosts": []string{m.dcs.Addr()}, "use_proxies": true, "protocol": "http"},
		"bootstrap": map[string]any{
			"dcs": map[string]any{
				"ttl": secs(o.TTL), "loop_wait": secs(o.LoopWait), "retry_timeout": secs(o.RetryTimeout),
				"maximum_lag_on_failover": 1 << 20,
				"synchronous_mode":        !o.Asynchronous,
				// Strict: the leader never commits alone. Without it Patroni lets the leader
				// commit alone while no standby is healthy, and a failover in that window
				// (before an instance's next look at the primary) loses commits: the
				// instances then stop for good (docs/operations.md, "The failover guard").
				"synchronous_mode_strict": !o.Asynchronous,
				// A primary whose postmaster died fails over at once instead of being
				// restarted in place.
				"primary_start_timeout": 0,
				"postgresql":            map[string]any{"use_pg_rewind": true, "use_slots": true, "parameters": params},
			},
			"initdb": []any{map[string]string{"encoding": "UTF8"}, map[string]string{"locale": "C"}, map[string]string{"auth": "trust"}},
			"pg_hba": []string{"local all all trust", "host all all 127.0.0.1/32 trust", "host replication all 127.0.0.1/32 trust"},
		},
		"postgresql": map[string]any{
			"listen":          m.Addr(),
			"connect_address": m.Addr(),
			"data_dir":        m.dataDir(),
			"bin_dir":         m.c.bins.PGBin,
			"pgpass":          filepath.Join(m.dir, "pgpass"),
			"authentication":  map[string]any{"superuser": auth, "replication": auth, "rewind": auth},
			"parameters":      map[string]string{"unix_socket_directories": m.dir},
			"pg_hba":          []string{"local all all trust", "host all all 127.0.0.1/32 trust", "host replication all 127.0.0.1/32 trust"},
		},
	}
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(m.configPath(), b, 0o644)
}

// start runs the member's Patroni.
func (m *Member) start() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.proc != nil && !m.proc.exited() {
		return fmt.Errorf("%s: patroni already running", m.Name)
	}
	p, err := spawn(m.LogPath(), m.c.cred, []string{"HOME=" + m.dir, "LC_ALL=C.UTF-8"}, m.c.bins.Patroni, m.configPath())
	if err != nil {
		return fmt.Errorf("%s: %w", m.Name, err)
	}
	m.proc = p
	return nil
}

// killPatroni SIGKILLs the member's Patroni process alone; its Postgres keeps running.
func (m *Member) killPatroni() error {
	m.mu.Lock()
	p := m.proc
	m.proc = nil
	m.mu.Unlock()
	if p == nil {
		return fmt.Errorf("%s: patroni not running", m.Name)
	}
	return p.kill(syscall.SIGKILL, false, 10*time.Second)
}

// postmasterPID reads the running postmaster's pid from its data directory.
func (m *Member) postmasterPID() (int, error) {
	b, err := os.ReadFile(filepath.Join(m.dataDir(), "postmaster.pid"))
	if err != nil {
		return 0, fmt.Errorf("%s: no postmaster: %w", m.Name, err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("%s: postmaster.pid: %q", m.Name, line)
	}
	return pid, nil
}

// killPostmaster SIGKILLs the member's postmaster (its backends notice its death and exit, as
// after a crash) and waits until it is gone.
func (m *Member) killPostmaster(ctx context.Context) error {
	pid, err := m.postmasterPID()
	if err != nil {
		return err
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("%s: kill postmaster %d: %w", m.Name, pid, err)
	}
	for syscall.Kill(pid, 0) == nil {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
	return nil
}

// stop ends the member for good: Patroni stops Postgres on SIGTERM; whatever is left of its
// process group, and a postmaster that outlived a killed Patroni, gets SIGKILL.
func (m *Member) stop() error {
	m.mu.Lock()
	p := m.proc
	m.proc = nil
	m.mu.Unlock()
	var errs []error
	if p != nil {
		if err := p.kill(syscall.SIGTERM, false, 20*time.Second); err != nil {
			errs = append(errs, err)
		}
		_ = syscall.Kill(-p.pid(), syscall.SIGKILL)
	}
	if pid, err := m.postmasterPID(); err == nil && syscall.Kill(pid, 0) == nil {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
	_ = m.dcs.Close()
	return errors.Join(errs...)
}

// Rewinds counts the times the member's Postgres was brought back by pg_rewind, from its log.
func (m *Member) Rewinds() int {
	b, _ := os.ReadFile(m.LogPath())
	return strings.Count(string(b), "running pg_rewind from")
}

func tailFile(path string, n int) string {
	b, _ := os.ReadFile(path)
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return strings.TrimSpace(string(b))
}
