package lease_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/batchclaim/batchclaim/internal/lease"
)

func TestDeadlineExpiresOnce(t *testing.T) {
	var fired atomic.Int32
	d := lease.NewDeadline(50*time.Millisecond, func() { fired.Add(1) })
	d.Start(time.Now())
	if !d.Live() {
		t.Fatal("not live right after Start")
	}
	select {
	case <-d.Done():
	case <-time.After(2 * time.Second):
		t.Fatal("the watchdog did not end the lease at its deadline")
	}
	if n := fired.Load(); n != 1 { // Done closes after OnExpire has returned
		t.Fatalf("OnExpire ran %d times when Done closed, want 1", n)
	}
	if d.Live() || d.Check() {
		t.Fatal("live after its deadline")
	}
	if d.Confirm(time.Now()) {
		t.Fatal("a renewal after the deadline revived the lease; only Start may")
	}
	d.Start(time.Now())
	if !d.Live() {
		t.Fatal("Start did not begin a new life")
	}
	d.Stop()
}

func TestDoneClosesAfterOnExpire(t *testing.T) {
	// Whoever waits on Done (Keep, and its caller after it) must find the work cancelled:
	// while OnExpire runs, the lease is over but Done stays open.
	running, release := make(chan struct{}), make(chan struct{})
	d := lease.NewDeadline(time.Millisecond, func() {
		close(running)
		<-release
	})
	defer d.Stop()
	d.Start(time.Now().Add(-time.Second)) // already past: the watchdog expires it at once
	select {
	case <-running:
	case <-time.After(2 * time.Second):
		t.Fatal("OnExpire did not run at the deadline")
	}
	if d.Live() || d.Check() {
		t.Fatal("live while OnExpire runs")
	}
	select {
	case <-d.Done():
		t.Fatal("Done closed before OnExpire returned")
	default:
	}
	close(release)
	select {
	case <-d.Done():
	case <-time.After(2 * time.Second):
		t.Fatal("Done did not close after OnExpire returned")
	}
}

func TestConfirmMovesDeadline(t *testing.T) {
	// A window far longer than the renewals' spacing, so that only a renewal that does not
	// move the deadline, not a loaded machine's pause between two of them, ends the lease.
	var fired atomic.Int32
	d := lease.NewDeadline(time.Second, func() { fired.Add(1) })
	defer d.Stop()
	start := time.Now()
	d.Start(start)
	for time.Since(start) < 300*time.Millisecond {
		sent := time.Now()
		if !d.Confirm(sent) {
			t.Fatal("a timely renewal was refused")
		}
		if got := d.At(); !got.Equal(sent.Add(time.Second)) {
			t.Fatalf("deadline %v, want the send time + window", got)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if fired.Load() != 0 || !d.Live() {
		t.Fatal("the lease expired although renewals kept coming")
	}
}

// A renewal whose own deadline has passed by the time its answer arrives (it sat in a queue,
// or the process was paused) ends the lease instead of extending it.
func TestLateConfirmExpires(t *testing.T) {
	var fired atomic.Int32
	d := lease.NewDeadline(time.Second, func() { fired.Add(1) })
	defer d.Stop()
	d.Start(time.Now())
	if d.Confirm(time.Now().Add(-2 * time.Second)) {
		t.Fatal("a renewal sent more than the window ago was accepted")
	}
	if fired.Load() != 1 || d.Live() {
		t.Fatalf("after a late renewal: OnExpire ran %d times, live %v; want 1, false", fired.Load(), d.Live())
	}
}

func TestLoseSkipsOnExpire(t *testing.T) {
	var fired atomic.Int32
	d := lease.NewDeadline(30*time.Millisecond, func() { fired.Add(1) })
	d.Start(time.Now())
	d.Lose()
	time.Sleep(80 * time.Millisecond)
	if fired.Load() != 0 {
		t.Fatal("OnExpire ran for a lease the holder had dropped itself")
	}
	select {
	case <-d.Done():
	default:
		t.Fatal("Done not closed after Lose")
	}
}
