package election

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"
)

// Defaults for the timing knobs: the source design's own example values.
const (
	HeartbeatIntervalDefault = time.Second     // I
	TimeoutDefault           = 5 * time.Second // T
)

// Config configures an Elector.
type Config struct {
	// Roles are the roles this instance stands for. Each role has at most one primary at a
	// time among all instances using the same database. At least one is required.
	Roles []string
	// Name is a human-readable label of this instance, shown by GetPrimary and
	// `batchclaim primary`. Empty means "<host>-<pid>".
	Name string
	// Host is the machine this instance runs on; `batchclaim primary` compares it with its
	// own. Empty means os.Hostname().
	Host string

	// HeartbeatInterval (I) is how often the instance renews its lease, and how often a
	// standby looks for a role without a live primary. Zero means Timeout/5, or 1s when
	// Timeout is zero too.
	HeartbeatInterval time.Duration
	// Timeout (T): a primary whose lease was not renewed for T (by the database clock) may be
	// replaced. It must be greater than 2I. A primary steps down on its own once T - I has
	// passed since it sent its last confirmed renewal. Zero means 5 x HeartbeatInterval, or
	// 5s when HeartbeatInterval is zero too.
	Timeout time.Duration

	// OnElected, when set, is called in its own goroutine each time this instance becomes
	// primary of a role. ctx is cancelled when it steps down, which happens strictly before
	// any other instance can be elected for the role. Returning early does not resign.
	OnElected func(ctx context.Context, t Term)
	// OnSteppedDown, when set, is called (synchronously, keep it short) right after the
	// context of a term was cancelled, with the reason.
	OnSteppedDown func(t Term, why StepDownReason)

	// Logger receives the elector's logs. Nil discards them.
	Logger *slog.Logger
}

// StepDownReason says why a term ended for this instance.
type StepDownReason string

const (
	// StepDownDeadline: no renewal was confirmed within T - I of its sending.
	StepDownDeadline StepDownReason = "deadline"
	// StepDownLost: the database says the lease or the term is no longer this instance's.
	StepDownLost StepDownReason = "lost"
	// StepDownFenced: a Fence found the term over.
	StepDownFenced StepDownReason = "fenced"
	// StepDownStopped: Run's context ended.
	StepDownStopped StepDownReason = "stopped"
)

// withDefaults returns c with every zero field set to its default.
func (c Config) withDefaults() Config {
	if c.Host == "" {
		c.Host, _ = os.Hostname()
	}
	if c.Name == "" {
		c.Name = fmt.Sprintf("%s-%d", c.Host, os.Getpid())
	}
	c.HeartbeatInterval = cmp.Or(c.HeartbeatInterval, c.Timeout/5, HeartbeatIntervalDefault)
	c.Timeout = cmp.Or(c.Timeout, 5*c.HeartbeatInterval)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// validate checks a Config with defaults applied; each error names the rule and the values.
func (c Config) validate() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if c.HeartbeatInterval <= 0 {
		bad("heartbeat interval I must be positive, got %s", c.HeartbeatInterval)
	}
	if c.Timeout <= 2*c.HeartbeatInterval {
		bad("timeout T > 2I violated: T = %s, I = %s (2I = %s)", c.Timeout, c.HeartbeatInterval, 2*c.HeartbeatInterval)
	}
	if c.Timeout%time.Millisecond != 0 || c.HeartbeatInterval%time.Millisecond != 0 {
		bad("timings must be whole milliseconds, got I = %s, T = %s", c.HeartbeatInterval, c.Timeout)
	}
	if len(c.Roles) == 0 {
		bad("no roles: an elector must stand for at least one role")
	}
	seen := map[string]bool{}
	for _, r := range c.Roles {
		switch {
		case r == "":
			bad("empty role name")
		case len(r) > 200:
			bad("role %.20q... is %d bytes; at most 200 allowed", r, len(r))
		case seen[r]:
			bad("role %q listed twice", r)
		}
		seen[r] = true
	}
	if len(c.Name) > 200 || len(c.Host) > 200 {
		bad("name and host must be at most 200 bytes")
	}
	if len(errs) > 0 {
		return fmt.Errorf("invalid election config: %w", errors.Join(errs...))
	}
	return nil
}

// Resolve applies the defaults and checks every rule, returning the configuration in force
// (HeartbeatInterval and Timeout among it).
func (c Config) Resolve() (Config, error) {
	c = c.withDefaults()
	return c, c.validate()
}
