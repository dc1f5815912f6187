package lease

import (
	"context"
	"fmt"
	"time"
)

// Loop says how Keep renews a lease.
type Loop struct {
	// Every is the time between renewals. It should be at most a third of the window, so
	// that a failed renewal leaves at least one more try before the deadline.
	Every time.Duration
	// Step bounds one renewal. A renewal is also bounded by the deadline: one that arrives
	// later cannot help.
	Step time.Duration
	// Window is the deadline's length: a live lease lasts until the send time of its last
	// confirmed renewal + Window. It must be less than the lease's TTL in the database.
	Window time.Duration
	// Sent is when the acquisition (or last renewal) the lease rests on was sent.
	Sent time.Time
	// OnExpire runs when the deadline passes without a confirmed renewal (on the watchdog's
	// goroutine or Keep's), before Keep returns: cancel the work here, so that it stops at
	// the deadline even while a renewal hangs. It may be nil.
	OnExpire func()
	// OnError is told of a renewal that failed and will be tried again. It may be nil.
	OnError func(error)
}

// Renew is one renewal: it returns when it sent the statement, whether the database refused
// it (lost: the lease was taken over or had ended), and what went wrong, if anything; a lost
// renewal's error says why, as Keep returns it.
type Renew func(ctx context.Context) (sent time.Time, lost bool, err error)

// Keep renews a lease every l.Every until ctx ends (it returns nil), the database refuses a
// renewal (it returns that renewal's error), or the local deadline passes without a confirmed
// renewal (it returns an error wrapping ErrExpired and naming the last renewal's error).
func Keep(ctx context.Context, l Loop, renew Renew) error {
	d := NewDeadline(l.Window, l.OnExpire)
	d.Start(l.Sent)
	defer d.Stop()
	t := time.NewTicker(l.Every)
	defer t.Stop()
	var last error
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-d.Done():
			if ctx.Err() != nil {
				return nil
			}
			return expired(last)
		case <-t.C:
		}
		lost, err := renewOnce(ctx, l, d, renew)
		switch {
		case ctx.Err() != nil:
			return nil
		case lost:
			return err
		case err != nil:
			last = err
			if !d.Check() { // the renewal ran into the deadline: do not wait for the next tick
				// The watchdog may have ended the lease first and be running OnExpire still:
				// Done closes once it has returned (at once if this Check ran it).
				<-d.Done()
				return expired(last)
			}
			if l.OnError != nil {
				l.OnError(err)
			}
		}
	}
}

// renewOnce runs one renewal bounded by l.Step and the deadline, and confirms it.
func renewOnce(ctx context.Context, l Loop, d *Deadline, renew Renew) (lost bool, err error) {
	end := time.Now().Add(l.Step)
	if at := d.At(); at.Before(end) {
		end = at
	}
	rctx, cancel := context.WithDeadline(ctx, end)
	defer cancel()
	sent, lost, err := renew(rctx)
	if err == nil && !lost {
		d.Confirm(sent) // a late one changes nothing; the deadline then ends the loop
	}
	return lost, err
}

func expired(last error) error {
	if last == nil {
		return ErrExpired
	}
	return fmt.Errorf("%w (last renewal: %v)", ErrExpired, last)
}
