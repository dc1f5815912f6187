package singleflight

import (
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"
)

// Defaults for the Config fields left zero.
const (
	TTLDefault          = 5 * time.Minute
	ErrorTTLDefault     = 5 * time.Second
	LeaseTTLDefault     = 10 * time.Second
	MaxFetchTimeDefault = time.Minute
	PollIntervalDefault = 2 * time.Second
)

// maxKeyLen keeps a key within what a NOTIFY payload carries (8000 bytes) with room to spare.
const maxKeyLen = 1000

// Config shapes a Cache. Every duration is measured by the database clock where it is stored
// (TTL, ErrorTTL, LeaseTTL) and by the local monotonic clock only where it bounds what this
// process does (MaxFetchTime, RenewInterval, PollInterval).
type Config struct {
	// Holder names this instance in the lease rows. Zero means host-pid-random, unique per
	// Cache. Two live caches must never share a Holder.
	Holder string

	// TTL is how long a fetched value is fresh, counted from the moment its fetch lease was
	// taken (the expiry is fixed before the source is called). Zero means TTLDefault. Keep it
	// well above the usual fetch time: a fetch that outlasts it stores a value that is stale
	// on arrival (its waiters still get it, marked Entry.Stale).
	TTL time.Duration

	// ErrorTTL is how long a source error is kept and served as a negative result, so that
	// the waiters of that fetch get it and a failing source is not called by every instance
	// in turn. Zero means ErrorTTLDefault. At most TTL.
	ErrorTTL time.Duration

	// LeaseTTL is the fetch lease: a fetcher that stops renewing (died, hung, cut off) is
	// replaced by a waiter LeaseTTL after its last renewal. Zero means LeaseTTLDefault.
	LeaseTTL time.Duration

	// RenewInterval is how often a fetcher renews its lease while the source runs. Zero means
	// LeaseTTL/4. At most LeaseTTL/3, so that one failed renewal does not lose the lease.
	RenewInterval time.Duration

	// MaxFetchTime bounds one call of the source: past it the call is cancelled (and stored
	// as a negative result) and the lease is no longer renewed, so a source that ignores its
	// context holds the key for at most MaxFetchTime + LeaseTTL. Zero means
	// MaxFetchTimeDefault.
	MaxFetchTime time.Duration

	// PollInterval is how often a waiter re-reads the key when no notification wakes it
	// (the fallback for a lost LISTEN connection or a cache that is not Run). Zero means
	// PollIntervalDefault.
	PollInterval time.Duration

	// Logger receives the cache's logs. Nil discards them.
	Logger *slog.Logger
}

// withDefaults returns c with every zero field set to its default.
func (c Config) withDefaults() Config {
	if c.Holder == "" {
		c.Holder = defaultHolder()
	}
	c.TTL = cmp.Or(c.TTL, TTLDefault)
	c.ErrorTTL = cmp.Or(c.ErrorTTL, ErrorTTLDefault)
	c.LeaseTTL = cmp.Or(c.LeaseTTL, LeaseTTLDefault)
	c.RenewInterval = cmp.Or(c.RenewInterval, c.LeaseTTL/4)
	c.MaxFetchTime = cmp.Or(c.MaxFetchTime, MaxFetchTimeDefault)
	c.PollInterval = cmp.Or(c.PollInterval, PollIntervalDefault)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// validate checks a Config with defaults applied; each error names the bad field.
func (c Config) validate() error {
	var errs []error
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"TTL", c.TTL}, {"ErrorTTL", c.ErrorTTL}, {"LeaseTTL", c.LeaseTTL}, {"RenewInterval", c.RenewInterval},
		{"MaxFetchTime", c.MaxFetchTime}, {"PollInterval", c.PollInterval}} {
		if d.v < time.Millisecond {
			errs = append(errs, fmt.Errorf("%s must be at least 1ms, got %s", d.name, d.v))
		}
	}
	if c.ErrorTTL > c.TTL {
		errs = append(errs, fmt.Errorf("ErrorTTL must be at most TTL: ErrorTTL = %s, TTL = %s", c.ErrorTTL, c.TTL))
	}
	if c.RenewInterval > c.LeaseTTL/3 {
		errs = append(errs, fmt.Errorf("RenewInterval must be at most LeaseTTL/3: RenewInterval = %s, LeaseTTL = %s", c.RenewInterval, c.LeaseTTL))
	}
	if len(c.Holder) > 200 || strings.TrimSpace(c.Holder) == "" {
		errs = append(errs, fmt.Errorf("Holder must be 1 to 200 characters and not blank, got %q", c.Holder))
	}
	if len(errs) > 0 {
		return fmt.Errorf("invalid singleflight config: %w", errors.Join(errs...))
	}
	return nil
}

// localDeadline is how long a fetcher goes on without a successful renewal (monotonic, from
// sending its last one) before it cancels its source call: the lease it wrote then ends at
// least LeaseTTL after the send, so the fetcher stops before anyone may take over.
func (c Config) localDeadline() time.Duration { return c.LeaseTTL * 2 / 3 }

func defaultHolder() string {
	host, _ := os.Hostname()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%s-%d-%s", cmp.Or(host, "host"), os.Getpid(), hex.EncodeToString(b))
}
