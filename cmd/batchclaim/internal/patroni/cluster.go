package patroni

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/batchclaim/batchclaim/testkit/pglocal"
)

// scope is the Patroni cluster name (the etcd key prefix).
const scope = "batchclaim"

// Defaults applied to zero Options fields.
const (
	MembersDefault      = 3
	TTLDefault          = 10 * time.Second
	LoopWaitDefault     = time.Second
	RetryTimeoutDefault = 4 * time.Second
	// StartTimeoutDefault bounds Start: etcd, the leader's bootstrap and the replicas' copies.
	StartTimeoutDefault = 3 * time.Minute
)

// Options configures Start.
type Options struct {
	// Members is the number of Patroni members. Zero means 3; at least 2.
	Members int
	// TTL, LoopWait and RetryTimeout are Patroni's ttl, loop_wait and retry_timeout, in whole
	// seconds. Zero means 10s, 1s and 4s. Patroni needs loop_wait + 2 x retry_timeout <= ttl.
	TTL, LoopWait, RetryTimeout time.Duration
	// Asynchronous turns synchronous_mode off: a failover may then lose the last commits.
	// False (the default) is synchronous_mode: true, the supported setup.
	Asynchronous bool
	// Parameters are extra Postgres settings (name -> value) for every member, after the
	// harness's own. Nil means none.
	Parameters map[string]string
	// KeepDir leaves the cluster's directory (the members' logs) behind after Stop.
	KeepDir bool
	// Logger receives progress messages. Nil discards them.
	Logger *slog.Logger
}

func (o Options) withDefaults() Options {
	o.Members = cmp.Or(o.Members, MembersDefault)
	o.TTL = cmp.Or(o.TTL, TTLDefault)
	o.LoopWait = cmp.Or(o.LoopWait, LoopWaitDefault)
	o.RetryTimeout = cmp.Or(o.RetryTimeout, RetryTimeoutDefault)
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

func (o Options) validate() error {
	whole := func(d time.Duration) bool { return d >= time.Second && d%time.Second == 0 }
	switch {
	case o.Members < 2:
		return fmt.Errorf("patroni cluster: members %d: at least 2", o.Members)
	case !whole(o.TTL) || !whole(o.LoopWait) || !whole(o.RetryTimeout):
		return fmt.Errorf("patroni cluster: ttl %v, loop_wait %v and retry_timeout %v must be whole seconds", o.TTL, o.LoopWait, o.RetryTimeout)
	case o.LoopWait+2*o.RetryTimeout > o.TTL:
		return fmt.Errorf("patroni cluster: loop_wait %v + 2 x retry_timeout %v exceeds ttl %v", o.LoopWait, o.RetryTimeout, o.TTL)
	}
	return nil
}

// Cluster is a running etcd and its Patroni members in a temporary directory. Its methods are
// safe for concurrent use.
type Cluster struct {
	bins    Binaries
	opts    Options
	dir     string
	cred    *syscall.Credential // non-nil when Patroni and Postgres run as another user
	etcd    *etcd
	members []*Member
	log     *slog.Logger
	lock    *os.File // the machine lock (lockMachine), held until Stop
}

// Start finds the programs (Find), starts etcd and the members on free ports of 127.0.0.1 in
// a new temporary directory, and returns once one member leads, accepts writes and (in
// synchronous mode) has a synchronous standby, and every other member streams from it. Stop
// ends and removes everything. One cluster runs per machine: while another process's
// cluster runs, Start waits for its Stop (until ctx ends; see machineLockName).
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	opts = opts.withDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	bins, err := Find()
	if err != nil {
		return nil, err
	}
	lock, err := lockMachine(ctx, machineLockPath(), opts.Logger)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "batchclaim-patroni-")
	if err != nil {
		lock.Close()
		return nil, err
	}
	c := &Cluster{bins: bins, opts: opts, dir: dir, log: opts.Logger, lock: lock}
	// The members, running as another user, read their configuration below it.
	if err := os.Chmod(dir, 0o755); err != nil {
		_ = os.RemoveAll(dir)
		lock.Close()
		return nil, err
	}
	if os.Geteuid() == 0 {
		if c.cred, err = pglocal.Unprivileged(); err != nil {
			_ = os.RemoveAll(dir)
			lock.Close()
			return nil, err
		}
	}
	if err := c.start(ctx); err != nil {
		c.Stop(context.WithoutCancel(ctx))
		return nil, err
	}
	return c, nil
}

func (c *Cluster) start(ctx context.Context) error {
	var err error
	if c.etcd, err = newEtcd(c.bins.Etcd, c.dir); err != nil {
		return err
	}
	if err := c.etcd.start(ctx); err != nil {
		return err
	}
	// patronictl reaches etcd directly, not through a member's proxy that a fault may cut.
	ctl := fmt.Sprintf(`{"scope": %q, "etcd3": {"hosts": [%q], "use_proxies": true, "protocol": "http"}}`, scope, c.etcd.addr())
	if err := os.WriteFile(c.ctlConfig(), []byte(ctl), 0o644); err != nil {
		return err
	}
	for i := range c.opts.Members {
		m, err := newMember(c, i)
		if err != nil {
			return err
		}
		c.members = append(c.members, m)
	}
	for _, m := range c.members {
		if err := m.start(); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, StartTimeoutDefault)
	defer cancel()
	if st, err := c.WaitHealthy(ctx); err != nil {
		// The directory goes with Stop: the error carries the end of each unwell member's log.
		return fmt.Errorf("patroni cluster did not come up (logs in %s): %w%s", c.dir, err, c.unwellLogs(st))
	}
	leader, _, err := c.WaitWritable(ctx, "")
	if err != nil {
		return err
	}
	c.log.Info("patroni cluster up", "dir", c.dir, "leader", leader.Name, "url", c.URL("postgres"))
	return nil
}

func (c *Cluster) ctlConfig() string { return filepath.Join(c.dir, "patronictl.yml") }

// Dir is the cluster's directory: each member's patroni.log, patroni.yml and data, and
// etcd.log.
func (c *Cluster) Dir() string { return c.dir }

// Members returns the members, in the order URL lists them.
func (c *Cluster) Members() []*Member { return c.members }

// Member returns the member named name, or nil.
func (c *Cluster) Member(name string) *Member {
	for _, m := range c.members {
		if m.Name == name {
			return m
		}
	}
	return nil
}

// Addrs are the members' Postgres addresses, in the order URL lists them.
func (c *Cluster) Addrs() []string {
	out := make([]string, len(c.members))
	for i, m := range c.members {
		out[i] = m.Addr()
	}
	return out
}

// Timing is Patroni's ttl, loop_wait and retry_timeout.
func (c *Cluster) Timing() (ttl, loopWait, retryTimeout time.Duration) {
	return c.opts.TTL, c.opts.LoopWait, c.opts.RetryTimeout
}

// Synchronous reports whether the cluster runs with synchronous_mode.
func (c *Cluster) Synchronous() bool { return !c.opts.Asynchronous }

// URL is a multi-host URL of database db on every member as the superuser postgres, with
// target_session_attrs=read-write: a client finds the leader whichever member it is.
func (c *Cluster) URL(db string) string {
	u := url.URL{Scheme: "postgres", User: url.User("postgres"), Host: strings.Join(c.Addrs(), ","), Path: "/" + db}
	u.RawQuery = url.Values{"sslmode": {"disable"}, "target_session_attrs": {"read-write"}}.Encode()
	return u.String()
}

// DirectURL is a URL of database db on one member alone.
func (c *Cluster) DirectURL(m *Member, db string) string {
	return fmt.Sprintf("postgres://postgres@%s/%s?sslmode=disable", m.Addr(), db)
}

// Stop ends every member and etcd, removes the cluster's directory (unless KeepDir) and lets
// the next cluster on the machine start.
func (c *Cluster) Stop(ctx context.Context) {
	for _, m := range c.members {
		if err := m.stop(); err != nil {
			c.log.Warn("stop patroni member", "member", m.Name, "error", err)
		}
	}
	if c.etcd != nil {
		_ = c.etcd.stop(false)
	}
	if !c.opts.KeepDir {
		_ = os.RemoveAll(c.dir)
	}
	if c.lock != nil {
		_ = c.lock.Close() // a second Stop's Close fails, harmlessly
	}
}

// MemberState is a member as Patroni's REST API (/cluster) describes it.
type MemberState struct {
	Name     string `json:"name"`
	Role     string `json:"role"`  // leader, sync_standby, replica
	State    string `json:"state"` // running, streaming, stopped, starting, ...
	Timeline int    `json:"timeline"`
	Lag      any    `json:"lag"` // bytes, or "unknown"
}

// State asks the members' REST APIs (the first that answers) for the cluster as Patroni sees
// it.
func (c *Cluster) State(ctx context.Context) ([]MemberState, error) {
	var errs []error
	for _, m := range c.members {
		st, err := m.clusterState(ctx)
		if err == nil {
			return st, nil
		}
		errs = append(errs, err)
	}
	return nil, errors.Join(errs...)
}

func (m *Member) clusterState(ctx context.Context) ([]MemberState, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/cluster", m.APIPort), nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var body struct {
		Members []MemberState `json:"members"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, fmt.Errorf("%s: /cluster: %w", m.Name, err)
	}
	return body.Members, nil
}

// Leader returns the member Patroni names leader, or an error when none does.
func (c *Cluster) Leader(ctx context.Context) (*Member, error) {
	st, err := c.State(ctx)
	if err != nil {
		return nil, err
	}
	for _, s := range st {
		if s.Role == "leader" && s.State == "running" {
			if m := c.Member(s.Name); m != nil {
				return m, nil
			}
		}
	}
	return nil, fmt.Errorf("no running leader: %s", describe(st))
}

func describe(st []MemberState) string {
	var parts []string
	for _, s := range st {
		parts = append(parts, fmt.Sprintf("%s %s %s tl%d", s.Name, s.Role, s.State, s.Timeline))
	}
	if len(parts) == 0 {
		return "no members"
	}
	return strings.Join(parts, ", ")
}

// healthy reports whether st is a healthy cluster: every member running or streaming, one
// leader, every other member on its timeline and (synchronous mode) one synchronous standby.
func (c *Cluster) healthy(st []MemberState) bool {
	if len(st) != len(c.members) {
		return false
	}
	leaders, syncs, tl := 0, 0, 0
	for _, s := range st {
		if s.Role == "leader" {
			leaders++
			tl = s.Timeline
		}
		if s.Role == "sync_standby" {
			syncs++
		}
	}
	if leaders != 1 || (!c.opts.Asynchronous && syncs != 1) {
		return false
	}
	for _, s := range st {
		if s.State != "running" && s.State != "streaming" {
			return false
		}
		if s.Role != "leader" {
			if s.Timeline != tl {
				return false
			}
			if _, ok := s.Lag.(float64); !ok {
				return false
			}
		}
	}
	return true
}

// unwellLogs is the end of the log of every member st does not show running or streaming
// (every member when st is empty), one block per member.
func (c *Cluster) unwellLogs(st []MemberState) string {
	well := map[string]bool{}
	for _, s := range st {
		well[s.Name] = s.State == "running" || s.State == "streaming"
	}
	var b strings.Builder
	for _, m := range c.members {
		if !well[m.Name] {
			fmt.Fprintf(&b, "\n--- %s: end of %s ---\n%s", m.Name, m.LogPath(), tailFile(m.LogPath(), 2000))
		}
	}
	return b.String()
}

// WaitHealthy waits until every member runs, one leads and the others replicate from it on
// its timeline, one of them synchronously in synchronous mode (after a fault: until the
// cluster is whole again, a rewound member included). It returns the state it saw.
func (c *Cluster) WaitHealthy(ctx context.Context) ([]MemberState, error) {
	var st []MemberState
	var err error
	for {
		st, err = c.State(ctx)
		if err == nil && c.healthy(st) {
			return st, nil
		}
		select {
		case <-ctx.Done():
			if err == nil {
				err = errors.New(describe(st))
			}
			return st, fmt.Errorf("cluster not healthy: %w (last: %v)", ctx.Err(), err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// WaitWritable waits until a member other than not (empty: any member) commits a write
// through a direct connection, and returns it and the moment that commit returned: the moment
// a new leader accepts writes, which takeover bounds are measured from. In synchronous mode a
// commit returns only once a synchronous standby has it (or Patroni has found none and lets
// the leader commit alone).
func (c *Cluster) WaitWritable(ctx context.Context, not string) (*Member, time.Time, error) {
	var last error
	for {
		for _, m := range c.members {
			if m.Name == not {
				continue
			}
			if last = c.probeWrite(ctx, m); last == nil {
				return m, time.Now(), nil
			}
		}
		select {
		case <-ctx.Done():
			return nil, time.Time{}, fmt.Errorf("no member other than %q accepts writes: %w (last error: %v)", not, ctx.Err(), last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// probeWrite commits one row on m, if m is a primary.
func (c *Cluster) probeWrite(ctx context.Context, m *Member) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.DirectURL(m, "postgres")+"&target_session_attrs=read-write&connect_timeout=1")
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	_, err = conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS harness_writes (at timestamptz NOT NULL DEFAULT now());
		INSERT INTO harness_writes DEFAULT VALUES`)
	return err
}

// Rewinds counts the times a member was brought back by pg_rewind, over every member.
func (c *Cluster) Rewinds() int {
	n := 0
	for _, m := range c.members {
		n += m.Rewinds()
	}
	return n
}
