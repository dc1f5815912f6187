package main

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// child is an instance of this same binary started as a separate OS process.
type child struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// startChild runs `batchclaim args...` with its output appended to logPath.
func startChild(name, logPath string, args ...string) (*child, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find own executable: %w", err)
	}
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	c := &child{name: name, cmd: exec.Command(self, args...), done: make(chan struct{})}
	c.cmd.Stdout, c.cmd.Stderr = logf, logf
	if err := c.cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() {
		c.err = c.cmd.Wait()
		logf.Close()
		close(c.done)
	}()
	return c, nil
}

func (c *child) signal(s syscall.Signal) error { return c.cmd.Process.Signal(s) }

func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// stop asks the child to stop gracefully and kills it if it has not within grace.
func (c *child) stop(grace time.Duration) {
	if c.exited() {
		return
	}
	_ = c.signal(syscall.SIGCONT) // a stopped process cannot handle SIGTERM
	_ = c.signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(grace):
		_ = c.signal(syscall.SIGKILL)
		<-c.done
	}
}
