package testutil_test

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batchclaim/batchclaim/testkit/testutil"
)

const childEnv = "TESTUTIL_TEST_CHILD"

// TestMain makes the binary, started with childEnv, a child that says hello, echoes each line
// of its stdin back until "bye", and exits.
func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		fmt.Println("hello")
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() && sc.Text() != "bye" {
			fmt.Println("echo " + sc.Text())
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// fatalTB records a Fatalf and ends the goroutine, as testing.T does.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper() {}

func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// WaitFor returns once the condition holds, and fails naming what it waited for when it never
// does.
func TestWaitFor(t *testing.T) {
	t.Parallel()
	var n atomic.Int32
	testutil.WaitFor(t, time.Minute, "the third look", func() bool { return n.Add(1) == 3 })
	if got := n.Load(); got != 3 {
		t.Fatalf("condition looked at %d times, want 3", got)
	}

	f := &fatalTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		testutil.WaitFor(f, time.Nanosecond, "never", func() bool { return false })
	}()
	<-done
	if !strings.Contains(f.msg, "waiting for: never") {
		t.Fatalf("failure %q does not name what was waited for", f.msg)
	}
}

// A child gets its environment, takes stdin, and its lines are there to read in order, to
// wait for and to search; a line that never comes is not waited for past the output's end.
func TestChild(t *testing.T) {
	t.Parallel()
	c := testutil.StartChild(t, testutil.ChildConfig{Name: "echo", Env: []string{childEnv + "=1"}})
	if l, ok := c.Line(0, time.Minute); !ok || l != "hello" {
		t.Fatalf("line 0 = %q, %v; want hello", l, ok)
	}
	if _, err := fmt.Fprintln(c.Stdin(), "one"); err != nil {
		t.Fatal(err)
	}
	if l, ok := c.Line(1, time.Minute); !ok || l != "echo one" {
		t.Fatalf("line 1 = %q, %v; want echo one", l, ok)
	}
	if !c.Said("one") || !c.SaidPrefix("echo") || c.Said("two") {
		t.Fatalf("Said/SaidPrefix disagree with the output %q", c.Output())
	}
	if _, err := fmt.Fprintln(c.Stdin(), "bye"); err != nil {
		t.Fatal(err)
	}
	if l, ok := c.Line(2, time.Minute); ok {
		t.Fatalf("line 2 = %q after the child exited, want none", l)
	}
	if got := c.Output(); got != "hello\necho one" {
		t.Fatalf("output %q", got)
	}
}
