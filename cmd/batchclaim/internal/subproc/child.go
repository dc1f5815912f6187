package subproc

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"syscall"
	"time"

	"github.com/batchclaim/batchclaim/testkit/pglocal"
)

// Child is an instance of this same binary started as a separate OS process.
type Child struct {
	Name string
	Cmd  *exec.Cmd
	// Err is what Wait returned, once Done is closed.
	Err  error
	done chan struct{}
}

// Start runs `batchclaim args...` with its output appended to logPath.
func Start(name, logPath string, args ...string) (*Child, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find own executable: %w", err)
	}
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	c := &Child{Name: name, Cmd: exec.Command(self, args...), done: make(chan struct{})}
	c.Cmd.Stdout, c.Cmd.Stderr = logf, logf
	if err := c.Cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() {
		c.Err = c.Cmd.Wait()
		logf.Close()
		close(c.done)
	}()
	return c, nil
}

// StartTied is Start for processes that must die with this one (a parent-death signal), so
// that an interrupted bench leaves no instance behind.
func StartTied(name, logPath string, args ...string) (*Child, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find own executable: %w", err)
	}
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	c := &Child{Name: name, Cmd: exec.Command(self, args...), done: make(chan struct{})}
	c.Cmd.Stdout, c.Cmd.Stderr = logf, logf
	c.Cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	started := make(chan error, 1)
	go func() {
		// The parent-death signal fires when the thread that started the process ends:
		// keep this goroutine on it until the process exits.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		defer logf.Close()
		if err := c.Cmd.Start(); err != nil {
			started <- fmt.Errorf("start %s: %w", name, err)
			return
		}
		started <- nil
		c.Err = c.Cmd.Wait()
		close(c.done)
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return c, nil
}

// Signal sends s to the process.
func (c *Child) Signal(s syscall.Signal) error { return c.Cmd.Process.Signal(s) }

// Done is closed when the process has exited and Err is set.
func (c *Child) Done() <-chan struct{} { return c.done }

// Exited reports whether the process has exited.
func (c *Child) Exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// Stop asks the child to stop gracefully and kills it if it has not within grace.
func (c *Child) Stop(grace time.Duration) {
	if c.Exited() {
		return
	}
	_ = c.Signal(syscall.SIGCONT) // a stopped process cannot handle SIGTERM
	_ = c.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(grace):
		_ = c.Signal(syscall.SIGKILL)
		<-c.done
	}
}

// FreeAddr returns a loopback address with a port that was free a moment ago, for a child to
// listen on: pglocal.FreePort's, below the kernel's ephemeral range, so that no outgoing
// connection on the machine takes it before the child binds it.
func FreeAddr() (string, error) {
	p, err := pglocal.FreePort()
	if err != nil {
		return "", err
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(p)), nil
}
