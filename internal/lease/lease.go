// Package lease is the one implementation of the local side of a lease in the database: a
// row with an owner, an epoch or token and an expiry of now() + TTL by the database clock,
// renewed apart from the work it protects. The row and its statements belong to each user;
// what is shared is how the holder decides, without asking the database, that it must stop:
//
//   - Deadline: the local deadline, sent + Window on the monotonic clock, where sent is when
//     the last renewal the database confirmed was sent. The database stamped that renewal no
//     earlier than sent, so its expiry is at least sent + TTL: with Window < TTL the holder
//     stops before anyone else can take the lease, however long the answer took to arrive
//     or the process was paused. A watchdog timer calls OnExpire when the deadline passes
//     without a confirmed renewal, so that the work is cancelled even while a renewal hangs.
//   - Keep: the renewal loop. It renews every Every, bounds each try by Step and by the
//     deadline (a renewal that arrives later is of no use), retries a failed try at the next
//     tick, and stops when its context ends, when the database refuses a renewal (the lease
//     was taken over or ended) or when the deadline passes.
//
// Packages claims (the instance's lease, with a renewal loop of its own that goes on past the
// deadline: a later renewal starts the next life) and election (its renewal shares a cycle
// and a connection with the campaign for roles) use Deadline; packages lock (KeepAlive) and
// singleflight (a fetch's lease) use Keep. patterns/doc.go says why each uses which.
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
// holding a lock OnExpire takes.
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
		d.endLocked()
		d.mu.Unlock()
		d.onExpire()
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
	d.endLocked()
	d.mu.Unlock()
	d.onExpire()
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

// Done is closed when the current life of the lease ends (deadline, Lose or Stop); before
// the first Start it is closed already.
func (d *Deadline) Done() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.done
}
