package testutil_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batchclaim/batchclaim/httpguard"
	"github.com/batchclaim/batchclaim/testkit/testutil"
)

// exampleT stands in for the *testing.T a test passes to the helpers: an example has none.
// Like testing.T, its Fatalf ends the goroutine that calls it, and its cleanups run last
// added first (cleanup). Its Fatal panics, which fails the example with the message.
type exampleT struct {
	testing.TB
	cleanups *[]func()
}

func (exampleT) Helper()      {}
func (exampleT) Failed() bool { return false }

func (exampleT) Fatal(args ...any) { panic(fmt.Sprint(args...)) }

func (exampleT) Fatalf(format string, args ...any) {
	fmt.Printf("FAIL: "+format+"\n", args...)
	runtime.Goexit()
}

func (t exampleT) Cleanup(f func()) { *t.cleanups = append(*t.cleanups, f) }

// cleanup runs what the helpers left to do at the end of the test.
func (t exampleT) cleanup() {
	for i := len(*t.cleanups) - 1; i >= 0; i-- {
		(*t.cleanups)[i]()
	}
}

// A test waits for state another goroutine (or process) makes with WaitFor instead of
// sleeping: it returns as soon as the condition holds. The bound is for a stalled run, not a
// timing the test relies on; when it passes, the test fails naming what it waited for.
func ExampleWaitFor() {
	t := exampleT{cleanups: new([]func())} // in a test: its *testing.T
	var stored atomic.Bool
	go stored.Store(true) // the work the test started

	testutil.WaitFor(t, 10*time.Second, "the batch to be stored", stored.Load)
	fmt.Println("stored:", stored.Load())

	done := make(chan struct{})
	go func() {
		defer close(done)
		testutil.WaitFor(t, time.Millisecond, "a batch nobody stores", func() bool { return false })
		fmt.Println("not reached")
	}()
	<-done
	// Output:
	// stored: true
	// FAIL: timed out after 1ms waiting for: a batch nobody stores
}

// SiteLines counts what one log site wrote to a JSON log, its count lines included: a flood
// of 1,000 identical failures through an httpguard.Throttle is one line in full and one line
// counting the other 999, and no line of another site is counted.
func ExampleSiteLines() {
	var logs bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, nil))
	throttle := httpguard.NewThrottle(log, time.Hour)
	for range 1000 {
		throttle.Log(context.Background(), slog.LevelError, "status page: batch list", "err", "database unavailable")
	}
	throttle.Clear("status page: batch list") // writes the count now, not at the hour's end
	log.Error("status page: batch list failed differently")

	fmt.Println(testutil.SiteLines(logs.String(), "status page: batch list"))
	fmt.Println(testutil.SiteLines(logs.String(), "status page: search"))
	// Output:
	// 2
	// 0
}

// StartChild runs the test binary again as a child process; this package's TestMain, seeing
// TESTUTIL_TEST_CHILD in its environment, says hello and echoes each line of its stdin
// instead of running tests. The test reads the child's lines in order as they come, and
// writes to its stdin; when the test ends, its cleanup kills the child and waits for it.
func ExampleStartChild() {
	t := exampleT{cleanups: new([]func())} // in a test: its *testing.T
	defer t.cleanup()                      // in a test: done when it ends

	c := testutil.StartChild(t, testutil.ChildConfig{Name: "echo", Env: []string{childEnv + "=1"}})
	fmt.Println(c.Line(0, 10*time.Second))
	if _, err := fmt.Fprintln(c.Stdin(), "order-42"); err != nil {
		panic(err)
	}
	fmt.Println(c.Line(1, 10*time.Second))
	fmt.Println("said order-42:", c.Said("order-42"), "a line starts with hello:", c.SaidPrefix("hello"))
	fmt.Printf("output: %q\n", c.Output())
	// Output:
	// hello true
	// echo order-42 true
	// said order-42: true a line starts with hello: true
	// output: "hello\necho order-42"
}
