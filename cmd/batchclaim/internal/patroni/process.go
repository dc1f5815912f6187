package patroni

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"syscall"
	"time"
)

// process is a program the cluster started (etcd, a Patroni member).
type process struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once it has exited and been reaped
}

// spawn starts a program in its own process group, writing its output to logPath (appended).
// The goroutine that starts it keeps its OS thread locked until it exits, because the kernel
// sends the parent-death signal (SIGKILL: the harness never leaves a manager running) when
// the thread that forked the child ends.
func spawn(logPath string, cred *syscall.Credential, env []string, name string, args ...string) (*process, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", logPath, err)
	}
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Setpgid: true, Pdeathsig: syscall.SIGKILL}
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
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	return p, nil
}

func (p *process) pid() int { return p.cmd.Process.Pid }

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// kill sends sig to the process alone (group false) or to its whole process group, and waits
// up to limit for the process to exit.
func (p *process) kill(sig syscall.Signal, group bool, limit time.Duration) error {
	pid := p.pid()
	if group {
		pid = -pid
	}
	_ = syscall.Kill(pid, sig)
	select {
	case <-p.done:
		return nil
	case <-time.After(limit):
		return fmt.Errorf("process %d still running %v after signal %v", p.pid(), limit, sig)
	}
}
