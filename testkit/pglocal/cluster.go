package pglocal

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// Options configures Start.
type Options struct {
	// BinDir holds initdb, pg_ctl and postgres. Empty means search as Find("") does.
	BinDir string
	// Logger receives progress messages; nil discards them.
	Logger *slog.Logger
	// Port is the port to listen on. Zero picks a free one.
	Port int
	// Settings are server settings (name -> value) given to postgres as -c options after the
	// defaults, so they override them: e.g. {"synchronous_commit": "on"} for a cluster whose
	// commits must wait for a synchronous standby. Nil means none.
	Settings map[string]string
}

const (
	// readyTimeout bounds the wait for a started server to accept connections.
	readyTimeout = 60 * time.Second
	// stopTimeout bounds pg_ctl stop and the wait for the postmaster to exit afterwards.
	stopTimeout = 30 * time.Second
	// portAttempts is how often Start picks a new port when another process took the last one.
	portAttempts = 3
)

// Cluster is a running throwaway cluster. Its methods are safe for concurrent use.
type Cluster struct {
	bin, dir, data string
	port           int
	settings       []string            // extra -c options, name=value
	cred           *syscall.Credential // non-nil when the cluster runs as another user
	log            *slog.Logger

	mu      sync.Mutex
	proc    *process // the running postmaster; nil while stopped
	removed bool     // Stop ran
}

// process is a postmaster started by this package.
type process struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once the postmaster has exited and been reaped
}

// Start creates a cluster in a new temporary directory and starts it on a free port of
// 127.0.0.1, tuned for tests (no fsync, no synchronous commit, no full-page writes). It
// returns once the server accepts connections. Stop removes everything it created.
//
// The postmaster is a child of this process that receives SIGQUIT if this process dies
// without calling Stop, so a crashed or killed test binary leaves no server running (its
// temporary directory does stay behind).
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	bin, err := Find(opts.BinDir)
	if err != nil {
		return nil, err
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	dir, err := os.MkdirTemp("", "batchclaim-pg-")
	if err != nil {
		return nil, fmt.Errorf("create cluster directory: %w", err)
	}
	c := &Cluster{bin: bin, dir: dir, data: filepath.Join(dir, "data"), log: log, settings: settingFlags(opts.Settings)}
	if err := c.create(ctx); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	for attempt := 1; ; attempt++ {
		c.port = opts.Port
		if c.port == 0 {
			if c.port, err = FreePort(); err != nil {
				_ = os.RemoveAll(dir)
				return nil, err
			}
		}
		err = c.start(ctx)
		if err == nil || attempt == portAttempts || opts.Port != 0 || !errors.Is(err, errPortTaken) {
			break
		}
		log.Debug("port taken, trying another", "port", c.port)
	}
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	log.Info("throwaway postgres started", "dir", dir, "port", c.port, "bin_dir", bin)
	return c, nil
}

// URL is a URL for the cluster's postgres database as the superuser postgres.
func (c *Cluster) URL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", c.port)
}

// Port is the TCP port the server listens on (127.0.0.1 only).
func (c *Cluster) Port() int { return c.port }

// Stop shuts the server down (pg_ctl stop -m fast, then SIGKILL to its process group if that
// fails) and removes the cluster's directory. Calling it again does nothing.
func (c *Cluster) Stop(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.removed {
		return nil
	}
	c.removed = true
	err := c.stop(ctx)
	if rerr := os.RemoveAll(c.dir); err == nil && rerr != nil {
		err = fmt.Errorf("remove cluster directory: %w", rerr)
	}
	c.log.Info("throwaway postgres stopped", "dir", c.dir, "port", c.port)
	return err
}

// Restart stops the server and starts it again on the same port and data directory. Fault
// tests use it; every open connection is cut.
func (c *Cluster) Restart(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.removed {
		return errors.New("restart: cluster was stopped")
	}
	if err := c.stop(ctx); err != nil {
		return fmt.Errorf("restart: %w", err)
	}
	if err := c.start(ctx); err != nil {
		return fmt.Errorf("restart: %w", err)
	}
	c.log.Info("throwaway postgres restarted", "port", c.port)
	return nil
}

// create runs initdb, as an unprivileged user when running as root.
func (c *Cluster) create(ctx context.Context) error {
	if os.Geteuid() == 0 {
		cred, err := Unprivileged()
		if err != nil {
			return err
		}
		if err := os.Chown(c.dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return fmt.Errorf("hand cluster directory to uid %d: %w", cred.Uid, err)
		}
		c.cred = cred
	}
	err := c.run(ctx, "initdb", "-D", c.data, "-U", "postgres", "--auth=trust", "--no-sync",
		"-E", "UTF8", "--locale=C")
	if err != nil {
		return fmt.Errorf("initdb: %w", err)
	}
	return nil
}

// errPortTaken means the postmaster could not bind its port.
var errPortTaken = errors.New("port already in use")

// start spawns the postmaster and waits until it accepts connections; on failure no
// postmaster is left running. Callers hold c.mu (or own c exclusively).
func (c *Cluster) start(ctx context.Context) error {
	p, err := c.spawn()
	if err != nil {
		return err
	}
	c.proc = p
	if err := c.waitReady(ctx, p); err != nil {
		_ = c.stop(context.WithoutCancel(ctx))
		log := c.logTail()
		if strings.Contains(log, "could not bind") || strings.Contains(log, "already in use") {
			err = fmt.Errorf("%w: %w", errPortTaken, err)
		}
		return fmt.Errorf("start postgres: %w; server log: %s", err, log)
	}
	return nil
}

// spawn starts the postmaster as a child process in its own process group. The goroutine
// that starts it keeps its OS thread locked until the postmaster exits, because the kernel
// sends the parent-death signal when the thread that forked the child ends.
func (c *Cluster) spawn() (*process, error) {
	logFile, err := os.OpenFile(c.logPath(), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open server log: %w", err)
	}
	args := []string{
		"-D", c.data,
		"-p", strconv.Itoa(c.port),
		"-k", c.dir,
		"-c", "listen_addresses=127.0.0.1",
		"-c", "fsync=off",
		"-c", "synchronous_commit=off",
		"-c", "full_page_writes=off",
		"-c", "max_connections=200",
	}
	for _, s := range c.settings {
		args = append(args, "-c", s)
	}
	cmd := exec.Command(filepath.Join(c.bin, "postgres"), args...)
	cmd.Dir = c.dir
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred, Setpgid: true, Pdeathsig: syscall.SIGQUIT}
	p := &process{cmd: cmd, done: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		defer logFile.Close()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		_ = cmd.Wait()
		close(p.done)
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("start postgres: %w", err)
	}
	return p, nil
}

// waitReady polls the server until a connection succeeds, the postmaster exits, ctx ends
// or readyTimeout passes.
func (c *Cluster) waitReady(ctx context.Context, p *process) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	for {
		err := ping(ctx, c.URL())
		if err == nil {
			return nil
		}
		select {
		case <-p.done:
			return errors.New("postgres exited during startup")
		case <-ctx.Done():
			return fmt.Errorf("postgres not accepting connections: %w (last error: %w)", ctx.Err(), err)
		case <-tick.C:
		}
	}
}

func ping(ctx context.Context, url string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	return conn.Close(ctx)
}

// stop shuts the running postmaster down, if any, and waits for it to exit. Callers hold
// c.mu (or own c exclusively).
func (c *Cluster) stop(ctx context.Context) error {
	p := c.proc
	if p == nil {
		return nil
	}
	c.proc = nil
	ctx, cancel := context.WithTimeout(ctx, stopTimeout)
	defer cancel()
	err := c.run(ctx, "pg_ctl", "-D", c.data, "-m", "fast", "-w", "-t", strconv.Itoa(int(stopTimeout/time.Second)), "stop")
	if err == nil {
		select {
		case <-p.done:
			return nil
		case <-ctx.Done():
			err = fmt.Errorf("postmaster still running after pg_ctl stop: %w", ctx.Err())
		}
	}
	select {
	case <-p.done: // it had exited already, so pg_ctl found nothing to stop
		return nil
	default:
	}
	// The postmaster and its backends share the process group Setpgid gave them.
	c.log.Warn("pg_ctl stop failed, killing postgres", "pid", p.cmd.Process.Pid, "error", err)
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	select {
	case <-p.done:
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("postgres (pid %d) survived SIGKILL after: %w", p.cmd.Process.Pid, err)
	}
}

// run runs one of the cluster's binaries to completion with the cluster's credentials.
func (c *Cluster) run(ctx context.Context, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, filepath.Join(c.bin, name), args...)
	cmd.Dir = c.dir
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	if c.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w: %s", name, err, tail(out, 600))
	}
	return nil
}

func (c *Cluster) logPath() string { return filepath.Join(c.dir, "server.log") }

func (c *Cluster) logTail() string {
	b, _ := os.ReadFile(c.logPath())
	return tail(b, 600)
}

// Unprivileged returns the credentials of the postgres user, else of nobody: what a process
// that Postgres must not see as root (initdb, postgres, a manager such as Patroni) runs as
// when this process is root.
func Unprivileged() (*syscall.Credential, error) {
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
		gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
		if err1 != nil || err2 != nil {
			continue
		}
		return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
	}
	return nil, errors.New("running as root, and neither a postgres nor a nobody user exists to run the cluster as (initdb and postgres refuse root)")
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return strings.TrimSpace(string(b))
}
