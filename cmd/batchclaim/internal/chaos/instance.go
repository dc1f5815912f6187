package chaos

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/batchclaim/batchclaim/cmd/batchclaim/internal/subproc"
	"github.com/batchclaim/batchclaim/testkit/tcpproxy"
	"github.com/batchclaim/batchclaim/wallclock"
)

// instance is one slot of the fleet: a `run` process (replaced after a SIGKILL, with a new
// name) behind its own TCP proxies, one per Postgres server, so that its link can be cut,
// blackholed or slowed alone. In front of each proxy a gate can refuse new connections
// while the open ones go on (pool_hog). The gates keep their addresses for the whole run;
// the instance lists them all in a multi-host URL and finds the primary through
// target_session_attrs=read-write.
type instance struct {
	slot    int
	proxies []*tcpproxy.Proxy
	gates   []*gate

	mu     sync.Mutex
	gen    int
	name   string
	id     uuid.UUID // read from the instances table once registered; zero until then
	listen string    // its HTTP address (ingest API, metrics)
	proc   *exec.Cmd
	done   chan struct{}
	state  string        // running | stopped | killed | exited
	skew   time.Duration // the wall-clock offset its processes run with (clock_skew); zero: none
	// retention: the slot's processes run the retention job with a short age (operation
	// retention_on), for the rest of the run.
	retention bool
	// rate: the schedule of clock rates its processes run with (operation clock_rate; package
	// wallclock's test hook), for the rest of the run; empty: none.
	rate string
}

// setSkew makes the slot's next processes read a wall clock off by d (package wallclock's
// test hook).
func (in *instance) setSkew(d time.Duration) {
	in.mu.Lock()
	in.skew = d
	in.mu.Unlock()
}

const (
	stateRunning = "running"
	stateStopped = "stopped" // SIGSTOPped
	// stateStopping: the harness is stopping the process, or has stopped it and will start
	// the next one (restart): its exit is not one by itself.
	stateStopping = "stopping"
	stateKilled   = "killed"
	stateExited   = "exited"
)

func newInstance(slot int, targets []string) (*instance, error) {
	in := &instance{slot: slot}
	for _, t := range targets {
		p, err := tcpproxy.Start("127.0.0.1:0", t)
		if err != nil {
			in.closeProxies()
			return nil, err
		}
		in.proxies = append(in.proxies, p)
		g, err := startGate(p.Addr())
		if err != nil {
			in.closeProxies()
			return nil, err
		}
		in.gates = append(in.gates, g)
	}
	return in, nil
}

// addrs are the addresses the slot's processes reach the servers through: its gates.
func (in *instance) addrs() []string {
	out := make([]string, len(in.gates))
	for i, g := range in.gates {
		out[i] = g.addr()
	}
	return out
}

func (in *instance) closeProxies() {
	for _, g := range in.gates {
		g.close()
	}
	for _, p := range in.proxies {
		_ = p.Close()
	}
}

// start runs a new generation of the slot's process.
func (in *instance) start(r *run) error {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.gen++
	in.name = fmt.Sprintf("i%d-%d", in.slot, in.gen)
	in.id = uuid.Nil
	addr, err := subproc.FreeAddr()
	if err != nil {
		return err
	}
	in.listen = addr
	c := r.cfg
	args := []string{"run", "--database-url", r.db.url(in.addrs(), in.name), "--dlt-url", r.simURL,
		"--instance-name", in.name, "--listen", in.listen, "--log-level", "info",
		"--renew-interval", c.Renew.String(), "--expiry-1", c.Expiry1.String(), "--expiry-2", c.Expiry2.String(),
		"--poll-interval", "200ms", "--unknown-answers", "3", "--unknown-grace", "3s", "--workers", "8",
		"--backoff-base", "50ms", "--backoff-max", "1s",
		"--pprof"} // loopback: the goroutines of an instance that stops making progress (dumpStacks)
	if d := r.dropIdleAfter(); d > 0 {
		args = append(args, "--drop-idle-after", d.String())
	}
	if r.halt {
		args = append(args, "--halt-on-invalid")
	}
	if in.retention {
		args = append(args, "--retention", retentionAge.String(), "--retention-interval", retentionInterval.String())
	}
	if c.AsyncStandby {
		// The demonstration runs without a synchronous standby on purpose.
		args = append(args, "--require-sync-standby=false")
	}
	logf, err := os.OpenFile(filepath.Join(r.logDir, in.name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(c.Binary, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if in.skew != 0 || in.rate != "" {
		cmd.Env = append(os.Environ(), wallclock.EnvOffset+"="+in.skew.String(), wallclock.EnvRate+"="+in.rate)
	}
	// The process dies with this one: the harness never leaves instances behind.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	done := make(chan struct{})
	started := make(chan error, 1)
	go func() {
		// Pdeathsig fires when the thread that forked the child ends: keep it.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		defer logf.Close()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		_ = cmd.Wait()
		close(done)
	}()
	if err := <-started; err != nil {
		return fmt.Errorf("start %s: %w", in.name, err)
	}
	in.proc, in.done, in.state = cmd, done, stateRunning
	return nil
}

func (in *instance) snapshot() (name, state string, id uuid.UUID) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.state == stateRunning && in.exitedLocked() {
		in.state = stateExited
	}
	return in.name, in.state, in.id
}

func (in *instance) exitedLocked() bool {
	if in.done == nil {
		return true
	}
	select {
	case <-in.done:
		return true
	default:
		return false
	}
}

// lookupID reads the instance's id from its registration, by name.
func (in *instance) lookupID(ctx context.Context, pool *pgxpool.Pool) uuid.UUID {
	in.mu.Lock()
	name, id := in.name, in.id
	in.mu.Unlock()
	if id != uuid.Nil {
		return id
	}
	qctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if err := pool.QueryRow(qctx, `SELECT id FROM batchclaim.instances WHERE name = $1 ORDER BY started_at DESC LIMIT 1`, name).Scan(&id); err != nil {
		return uuid.Nil
	}
	in.mu.Lock()
	if in.name == name {
		in.id = id
	}
	in.mu.Unlock()
	return id
}

func (in *instance) signal(sig syscall.Signal, state string) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.proc == nil || in.exitedLocked() {
		return
	}
	_ = in.proc.Process.Signal(sig)
	if state != "" {
		in.state = state
	}
}

// kill SIGKILLs the process and waits for it to be gone.
func (in *instance) kill() {
	in.signal(syscall.SIGKILL, stateKilled)
	in.mu.Lock()
	done := in.done
	in.mu.Unlock()
	if done != nil {
		<-done
	}
}

// stop asks the process to stop gracefully and kills it if it has not within grace. The slot
// is stopping from before the signal until the next start, so that the watcher (checkExited)
// does not take the exit for one by itself and start a second process in the slot.
func (in *instance) stop(grace time.Duration) {
	in.mu.Lock()
	proc, done := in.proc, in.done
	if proc != nil {
		in.state = stateStopping
	}
	in.mu.Unlock()
	if proc == nil {
		return
	}
	_ = proc.Process.Signal(syscall.SIGCONT)
	_ = proc.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(grace):
		_ = proc.Process.Signal(syscall.SIGKILL)
		<-done
	}
}
