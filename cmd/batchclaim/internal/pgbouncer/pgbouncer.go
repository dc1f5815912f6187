package pgbouncer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/batchclaim/batchclaim/testkit/pglocal"
)

// ErrNotFound means pgbouncer is not installed.
var ErrNotFound = errors.New("pgbouncer not found on PATH or in /usr/sbin (Debian package pgbouncer)")

// The pooling modes.
const (
	ModeTransaction = "transaction"
	ModeSession     = "session"
)

// PoolSizeDefault is the number of server connections per database and user.
const PoolSizeDefault = 20

// Options configures Start.
type Options struct {
	// Target is the server's host:port. Required.
	Target string
	// Mode is ModeTransaction or ModeSession. Empty means ModeTransaction.
	Mode string
	// PoolSize is the number of server connections per database and user. Zero means 20.
	PoolSize int
}

// Bouncer is a running pgbouncer.
type Bouncer struct {
	dir  string
	port int
	cmd  *exec.Cmd
	done chan struct{}
}

// Find returns the pgbouncer executable.
func Find() (string, error) {
	if p, err := exec.LookPath("pgbouncer"); err == nil {
		return p, nil
	}
	if fi, err := os.Stat("/usr/sbin/pgbouncer"); err == nil && !fi.IsDir() {
		return "/usr/sbin/pgbouncer", nil
	}
	return "", ErrNotFound
}

// Start writes a configuration in a new temporary directory and starts pgbouncer, returning
// once it accepts connections. Stop ends it and removes the directory.
func Start(ctx context.Context, o Options) (*Bouncer, error) {
	o.Mode = cmp.Or(o.Mode, ModeTransaction)
	o.PoolSize = cmp.Or(o.PoolSize, PoolSizeDefault)
	host, port, err := net.SplitHostPort(o.Target)
	if err != nil {
		return nil, fmt.Errorf("pgbouncer target %q: %w", o.Target, err)
	}
	if o.Mode != ModeTransaction && o.Mode != ModeSession {
		return nil, fmt.Errorf("pgbouncer mode %q: want %s or %s", o.Mode, ModeTransaction, ModeSession)
	}
	bin, err := Find()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "batchclaim-pgbouncer-")
	if err != nil {
		return nil, err
	}
	b := &Bouncer{dir: dir, done: make(chan struct{})}
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		if cred, err = pglocal.Unprivileged(); err == nil {
			err = os.Chown(dir, int(cred.Uid), int(cred.Gid))
		}
		if err != nil {
			_ = os.RemoveAll(dir)
			return nil, err
		}
	}
	if b.port, err = pglocal.FreePort(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	ini := fmt.Sprintf(`[databases]
* = host=%s port=%s

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir = %s
auth_type = trust
auth_file = %s
pool_mode = %s
default_pool_size = %d
max_client_conn = 500
max_db_connections = 0
server_reset_query = DISCARD ALL
server_check_delay = 0
logfile = %s
pidfile = %s
`, host, port, b.port, dir, filepath.Join(dir, "userlist.txt"), o.Mode, o.PoolSize, b.LogPath(), filepath.Join(dir, "pgbouncer.pid"))
	if err := os.WriteFile(filepath.Join(dir, "pgbouncer.ini"), []byte(ini), 0o644); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "userlist.txt"), []byte(`"postgres" ""`+"\n"), 0o644); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	b.cmd = exec.Command(bin, filepath.Join(dir, "pgbouncer.ini"))
	b.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGKILL}
	started := make(chan error, 1)
	go func() {
		// Pdeathsig fires when the thread that forked the child ends: keep it.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := b.cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		_ = b.cmd.Wait()
		close(b.done)
	}()
	if err := <-started; err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("start pgbouncer: %w", err)
	}
	if err := b.waitReady(ctx); err != nil {
		b.Stop()
		return nil, err
	}
	return b, nil
}

func (b *Bouncer) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	for {
		c, err := net.DialTimeout("tcp", b.Addr(), time.Second)
		if err == nil {
			return c.Close()
		}
		select {
		case <-b.done:
			return fmt.Errorf("pgbouncer exited at start: %s", b.logTail())
		case <-ctx.Done():
			return fmt.Errorf("pgbouncer not listening: %w: %s", ctx.Err(), b.logTail())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Addr is the address pgbouncer listens on.
func (b *Bouncer) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(b.port)) }

// LogPath is pgbouncer's log file.
func (b *Bouncer) LogPath() string { return filepath.Join(b.dir, "pgbouncer.log") }

// URL is a URL of database db through pgbouncer as the user postgres, with extra query
// parameters (e.g. default_query_exec_mode=exec) when given.
func (b *Bouncer) URL(db string, params url.Values) string {
	q := url.Values{"sslmode": {"disable"}}
	for k, v := range params {
		q[k] = v
	}
	u := url.URL{Scheme: "postgres", User: url.User("postgres"), Host: b.Addr(), Path: "/" + db, RawQuery: q.Encode()}
	return u.String()
}

// Stop ends pgbouncer and removes its directory.
func (b *Bouncer) Stop() {
	if b.cmd != nil && b.cmd.Process != nil {
		_ = b.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-b.done:
		case <-time.After(5 * time.Second):
			_ = b.cmd.Process.Kill()
			<-b.done
		}
	}
	_ = os.RemoveAll(b.dir)
}

func (b *Bouncer) logTail() string {
	data, _ := os.ReadFile(b.LogPath())
	if len(data) > 600 {
		data = data[len(data)-600:]
	}
	return strings.TrimSpace(string(data))
}
