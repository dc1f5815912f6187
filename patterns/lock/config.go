package lock

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// TTLDefault is the lock's time to live when Config.TTL is zero: the source design's
// `SET ... NX EX 60`.
const TTLDefault = 60 * time.Second

// Config configures a Locker.
type Config struct {
	// TTL is how long an acquisition or renewal keeps the lock, measured by the database
	// clock from the statement that took or renewed it. Zero means TTLDefault (60s).
	TTL time.Duration
	// Margin is taken off the TTL for the holder's local deadline (Lease.Deadline), for clock
	// rates that differ between the holder and the database and for the time the answer took
	// to arrive: the holder stops trusting the lease Margin before the database's expiry could
	// come by its own clock. Zero means TTL/10; it must be less than the TTL.
	Margin time.Duration
	// Logger receives the locker's logs. Nil discards them.
	Logger *slog.Logger
}

// withDefaults returns c with every zero field set to its default.
func (c Config) withDefaults() Config {
	c.TTL = cmp.Or(c.TTL, TTLDefault)
	c.Margin = cmp.Or(c.Margin, c.TTL/10)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// validate checks a Config with defaults applied; each error names the bad field.
func (c Config) validate() error {
	switch {
	case c.TTL < 0:
		return fmt.Errorf("invalid lock config: ttl must not be negative, got %s", c.TTL)
	case c.TTL < 10*time.Millisecond:
		return fmt.Errorf("invalid lock config: ttl must be at least 10ms, got %s", c.TTL)
	case c.TTL%time.Millisecond != 0:
		return errors.New("invalid lock config: ttl must be a whole number of milliseconds")
	case c.Margin < 0 || c.Margin >= c.TTL:
		return fmt.Errorf("invalid lock config: margin must be at least 0 and less than the ttl (%s), got %s", c.TTL, c.Margin)
	}
	return nil
}
