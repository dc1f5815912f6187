package lease

import (
	"errors"
	"sync"
	"time"

	"github.com/batchclaim/batchclaim/wallclock"
)

// ErrExpired is returned by Keep when the local deadline passed without a confirmed renewal.
var ErrExpired = errors.New("local lease deadline passed without a confirmed renewal")

// Deadline is a lease's local deadline and its watchdog. A lease is live from Start until
// its deadline passes (OnExpire runs, once), or until Lose or Stop; only Start makes it live
// again. It is safe for concurrent use. OnExpire runs on the watchdog's goroutine, or on the
// goroutine calling Check or Confirm, never with the Deadline's lock held: call those without
// holding a lock OnExpire takes. Done closes after OnExpire returns, so OnExpire must not wait
// on Done.
type Deadline struct {
	window   time.Duration
	onExpire func()

	mu    sync.Mutex
	at    time.Time // monotonic: send time of the last confirmed renewal + window
	live  bool
	done  chan struct{} // closed when the current life ends
	timer *time.Timer
}

// NewDeadline returns a Deadline that is not live yet. onExpire may be nil.
func NewDeadline(window time.Duration, onExpire func()) *Deadline {
	if onExpire == nil {
		onExpire = func() {}
	}
	done := make(chan struct{})
	close(done)
	return &Deadline{window: window, onExpire: onExpire, done: done}
}

// Start begins a life of the lease on an acquisition sent at sent: live until sent + window.
// A deadline already passed expires at once, on the watchdog's goroutine.
func (d *Deadline) Start(sent time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.live {
		d.live = true
		d.done = make(chan struct{})
	}
	d.setLocked(sent)
}

// Confirm records a renewal sent at sent that the database confirmed, and reports whether
// the lease is still live. A renewal confirmed after the lease ended, or whose own deadline
// has passed already, changes nothing: a late answer must not revive a holder that may have
// stopped its work, and a lease found past its deadline expires here (OnExpire runs).
func (d *Deadline) Confirm(sent time.Time) bool {
	d.mu.Lock()
	if !d.live {
		d.mu.Unlock()
		return false
	}
	if !time.Now().Before(sent.Add(wallclock.Span(sent, d.window))) {
		// Renewals are sent one after another, so the current deadline, which is no later
		// than this one, has passed too.
		d.expireUnlocking()
		return false
	}
	d.setLocked(sent)
	d.mu.Unlock()
	return true
}

func (d *Deadline) setLocked(sent time.Time) {
	d.at = sent.Add(wallclock.Span(sent, d.window)) // d.window itself, but for a test's clock rate
	wait := time.Until(d.at)
	if d.timer == nil {
		d.timer = time.AfterFunc(wait, func() { d.Check() })
	} else {
		d.timer.Reset(wait)
	}
}

// Check ends the lease if its deadline has passed (OnExpire runs, once per life) and reports
// whether it is still live. The watchdog calls it; a holder calls it too before it sends
// anything after a pause, so that a deadline passed while it was frozen is acted on first,
// whichever of the two runs first on waking.
func (d *Deadline) Check() bool {
	d.mu.Lock()
	if !d.live {
		d.mu.Unlock()
		return false
	}
	if wait := time.Until(d.at); wait > 0 {
		d.timer.Reset(wait) // fired early, or a renewal moved the deadline meanwhile
		d.mu.Unlock()
		return true
	}
	d.expireUnlocking()
	return false
}

// Lose ends the lease without OnExpire: the holder learnt from the database that it is gone
// and handles that itself.
func (d *Deadline) Lose() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.live {
		d.endLocked()
	}
}

// Stop ends the lease like Lose and stops the watchdog, for a holder that is shutting down.
func (d *Deadline) Stop() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.timer != nil {
		d.timer.Stop()
	}
	if d.live {
		d.endLocked()
	}
}

func (d *Deadline) endLocked() {
	d.live = false
	close(d.done)
}

// expireUnlocking ends the current life at its deadline: called with d.mu held, it releases
// it, runs OnExpire and only then closes Done, so that whoever waits on Done (Keep, and the
// caller Keep returns to) finds the work OnExpire cancels cancelled already. The life is over
// (Live and Check say so, Start begins a new one) from the moment the lock is released.
func (d *Deadline) expireUnlocking() {
	d.live = false
	done := d.done
	d.mu.Unlock()
	d.onExpire()
	close(done)
}

// Live reports whether the lease is live and its deadline has not passed. It never runs
// OnExpire, so it may be called with any lock held.
func (d *Deadline) Live() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.live && time.Now().Before(d.at)
}

// At is the local deadline of the current (or last) life: zero before the first Start.
func (d *Deadline) At() time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.at
}

// Done is closed when the current life of the lease ends: by Lose or Stop, or at its
// deadline once OnExpire has returned. Before the first Start it is closed already.
func (d *Deadline) Done() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.done
}
