package lease_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/batchclaim/batchclaim/internal/lease"
)

// Keep renews a lease until the database refuses a renewal. Here Renew stands in for the
// UPDATE of a lease row: its first two renewals are confirmed, and the third finds the row
// taken over by another owner, which ends the loop with that renewal's error. The window is
// far longer than the renewals' spacing, so the local deadline plays no part.
func ExampleKeep() {
	renewals := 0
	renew := func(ctx context.Context) (sent time.Time, lost bool, err error) {
		sent = time.Now() // before the statement goes out
		renewals++
		if renewals == 3 {
			return sent, true, errors.New("lease l: taken over by another owner")
		}
		return sent, false, nil
	}
	err := lease.Keep(context.Background(), lease.Loop{
		Every:  10 * time.Millisecond,
		Step:   time.Second,
		Window: time.Minute,
		Sent:   time.Now(), // when the acquisition was sent
	}, renew)
	fmt.Println("renewals:", renewals)
	fmt.Println("Keep:", err)
	fmt.Println("expired:", errors.Is(err, lease.ErrExpired))
	// Output:
	// renewals: 3
	// Keep: lease l: taken over by another owner
	// expired: false
}

// A renewal that hangs (the row is locked, the connection is gone) cannot keep the lease. Each
// renewal's context ends at the local deadline at the latest, and when the deadline passes
// OnExpire cancels the work the lease protects; Keep then returns ErrExpired.
func ExampleKeep_expired() {
	work, stopWork := context.WithCancel(context.Background())
	defer stopWork()
	hang := func(ctx context.Context) (time.Time, bool, error) {
		sent := time.Now()
		<-ctx.Done() // the statement never answers
		return sent, false, ctx.Err()
	}
	err := lease.Keep(context.Background(), lease.Loop{
		Every:    10 * time.Millisecond,
		Step:     time.Minute, // longer than the window: the deadline bounds the renewal
		Window:   100 * time.Millisecond,
		Sent:     time.Now(),
		OnExpire: stopWork,
	}, hang)
	fmt.Println("expired:", errors.Is(err, lease.ErrExpired))
	fmt.Println("work:", work.Err()) // OnExpire has run when Keep returns
	// Output:
	// expired: true
	// work: context canceled
}

// A holder with a renewal loop of its own keeps a Deadline: Start when the acquisition is
// confirmed, Confirm for every renewal the database confirmed, each with the time the
// statement was sent. The deadline is that send time plus the window. A renewal confirmed
// after its own deadline ends the lease instead of extending it, and only Start begins a new
// life.
func ExampleDeadline() {
	expiries := 0
	d := lease.NewDeadline(time.Minute, func() { expiries++ })
	defer d.Stop()

	acquired := time.Now()
	d.Start(acquired)
	fmt.Println("live:", d.Live(), "deadline after the send:", d.At().Sub(acquired))

	renewed := time.Now()
	fmt.Println("renewal confirmed:", d.Confirm(renewed), "deadline moved:", d.At().Equal(renewed.Add(time.Minute)))

	// The answer to a renewal sent two minutes ago arrives only now (the process was paused).
	fmt.Println("late renewal confirmed:", d.Confirm(time.Now().Add(-2*time.Minute)))
	fmt.Println("live:", d.Live(), "OnExpire ran:", expiries)
	select {
	case <-d.Done():
		fmt.Println("Done is closed")
	default:
		fmt.Println("Done is open")
	}

	d.Start(time.Now())
	fmt.Println("after Start: live:", d.Live())
	// Output:
	// live: true deadline after the send: 1m0s
	// renewal confirmed: true deadline moved: true
	// late renewal confirmed: false
	// live: false OnExpire ran: 1
	// Done is closed
	// after Start: live: true
}
