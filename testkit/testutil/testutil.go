package testutil

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// GoTool returns the go command (from PATH, else GOROOT's) for a test that lists packages or
// builds with other tags, and fails t when there is none.
func GoTool(t testing.TB) string {
	t.Helper()
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	if root := os.Getenv("GOROOT"); root != "" {
		return filepath.Join(root, "bin", "go")
	}
	t.Fatal("no go command in PATH or GOROOT")
	return ""
}

// PollInterval is how often WaitFor looks at its condition.
const PollInterval = 10 * time.Millisecond

// WaitFor polls cond every PollInterval until it holds, and fails t, naming what it waited
// for, once within has passed. within is a bound for a stalled run, not a timing the test
// depends on: make it generous. It may be called from a cleanup.
func WaitFor(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for: %s", within, what)
		}
		time.Sleep(PollInterval)
	}
}

// Child is the test binary run again as a child process, whose TestMain sees env and does
// the child's work instead of running tests. Its stdout and stderr are collected line by
// line; the test's cleanup resumes (SIGCONT) and kills it and waits for it, and logs its
// output if the test failed.
type Child struct {
	Cmd  *exec.Cmd
	name string

	mu    sync.Mutex
	lines []string
	grew  chan struct{} // closed and replaced when a line arrives or the output ends
	ended bool
	stdin io.WriteCloser
}

// ChildConfig says how to start a Child.
type ChildConfig struct {
	// Name labels the child's output in the test's log.
	Name string
	// Env lists the variables ("KEY=value") added to the test's environment; one of them
	// tells TestMain what the child is to do.
	Env []string
	// OwnStderr sends the child's stderr to the test's instead of collecting it with stdout,
	// for children whose stdout is a protocol read line by line.
	OwnStderr bool
}

// StartChild starts the test binary with no test to run (-test.run=^$) as cfg says.
func StartChild(t testing.TB, cfg ChildConfig) *Child {
	t.Helper()
	c := &Child{Cmd: exec.Command(os.Args[0], "-test.run=^$"), name: cfg.Name, grew: make(chan struct{})}
	c.Cmd.Env = append(os.Environ(), cfg.Env...)
	out, err := c.Cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	c.Cmd.Stderr = c.Cmd.Stdout
	if cfg.OwnStderr {
		c.Cmd.Stderr = os.Stderr
	}
	if c.stdin, err = c.Cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := c.Cmd.Start(); err != nil {
		t.Fatal(err)
	}
	read := make(chan struct{})
	go func() {
		defer close(read)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			c.add(sc.Text(), false)
		}
		_, _ = io.Copy(io.Discard, out)
		c.add("", true)
	}()
	t.Cleanup(func() {
		_ = c.Cmd.Process.Signal(syscall.SIGCONT)
		_ = c.Cmd.Process.Kill()
		<-read
		_ = c.Cmd.Wait()
		if t.Failed() {
			t.Logf("output of %s:\n%s", c.name, c.Output())
		}
	})
	return c
}

func (c *Child) add(line string, end bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if end {
		c.ended = true
	} else {
		c.lines = append(c.lines, line)
	}
	close(c.grew)
	c.grew = make(chan struct{})
}

// Stdin is the child's standard input.
func (c *Child) Stdin() io.WriteCloser { return c.stdin }

// Lines returns the lines the child has written so far.
func (c *Child) Lines() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.lines...)
}

// Output returns what the child has written so far.
func (c *Child) Output() string { return strings.Join(c.Lines(), "\n") }

// Said reports whether a line the child wrote contains sub.
func (c *Child) Said(sub string) bool {
	for _, l := range c.Lines() {
		if strings.Contains(l, sub) {
			return true
		}
	}
	return false
}

// SaidPrefix reports whether a line the child wrote starts with prefix.
func (c *Child) SaidPrefix(prefix string) bool {
	for _, l := range c.Lines() {
		if strings.HasPrefix(l, prefix) {
			return true
		}
	}
	return false
}

// Line returns the child's line number i (from 0), waiting up to within for it; ok is false
// when the child's output ended before it or within passed.
func (c *Child) Line(i int, within time.Duration) (line string, ok bool) {
	timeout := time.After(within)
	for {
		c.mu.Lock()
		if i < len(c.lines) {
			line := c.lines[i]
			c.mu.Unlock()
			return line, true
		}
		ended, grew := c.ended, c.grew
		c.mu.Unlock()
		if ended {
			return "", false
		}
		select {
		case <-grew:
		case <-timeout:
			return "", false
		}
	}
}

// Signal sends sig to the child, failing t if it cannot.
func (c *Child) Signal(t testing.TB, sig os.Signal) {
	t.Helper()
	if err := c.Cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
}
