package claims

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/google/uuid"
)

// Defaults for the timing knobs (DESIGN 4.8). A knob left at zero follows from the ones set;
// see Config.withDefaults.
const (
	RenewIntervalDefault  = 5 * time.Second   // R
	LocalDeadlineDefault  = 20 * time.Second  // D
	Expiry1Default        = 30 * time.Second  // T1
	MaxSubmissionDefault  = 60 * time.Second  // S
	Expiry2Default        = 120 * time.Second // T2
	MaxSerializationTries = 20
)

// Config configures an Engine. Every duration is wall time measured by the database (for
// expiries) or by the instance's monotonic clock (for its local deadline).
type Config struct {
	// InstanceID identifies this process in the instances table. Zero means a random one.
	InstanceID uuid.UUID
	// Name is a human-readable label shown by `status`. Empty means "<host>-<pid>".
	Name string
	// Host and Version are shown by `status`. Empty Host means os.Hostname().
	Host, Version string

	// RenewInterval (R) is how often the instance renews its lease and runs the claim cycle.
	// Zero means min(5s, Expiry1/6).
	RenewInterval time.Duration
	// LocalDeadline (D): if no renewal has succeeded within D of the moment the last successful
	// one was sent, the instance fences itself: it stops starting submissions, cancels the ones
	// running and treats its claims as lost. Zero means 2/3 of Expiry1.
	LocalDeadline time.Duration
	// Expiry1 (T1): a claim whose owner renewed within T1 is healthy; past T1 it may be taken if
	// no batch of it is in submission. Zero means 30s.
	Expiry1 time.Duration
	// Expiry2 (T2): past T2 a claim may be taken regardless. Zero means 4 x Expiry1.
	Expiry2 time.Duration
	// MaxSubmission (S) bounds one submission (one POST and the recording of its outcome).
	// Zero means min(60s, Expiry2 - LocalDeadline - Margin).
	MaxSubmission time.Duration
	// StopTime bounds how long the instance needs, once its local deadline passed, to stop
	// starting submissions. Zero means Expiry1/10.
	StopTime time.Duration
	// Margin absorbs network latency and clock-rate differences between the instance and the
	// database. Zero means Expiry1/10.
	Margin time.Duration

	// ShareSlack lets an instance keep up to ShareSlack claims over its fair share before it
	// releases surplus. Zero (the default) gives the tightest balance: after quiescence the
	// claim counts of any two instances differ by at most one.
	ShareSlack int
	// MaxSerializationRetries bounds the retries of one claim cycle on SQLSTATE 40001/40P01.
	// Zero means 20.
	MaxSerializationRetries int
	// PruneAfter: instances whose lease ended this long ago and that hold nothing are removed
	// from the registry. Zero means 10 x Expiry2; negative disables pruning.
	PruneAfter time.Duration

	// Logger receives the engine's logs. Nil discards them.
	Logger *slog.Logger
	// OnGained and OnLost, when set, are called (synchronously, from the cycle or from the
	// fencing watchdog) when a claim is gained or lost.
	OnGained func(Claim)
	OnLost   func(Claim, LossReason)
	// OnVoided, when set, is called after a cycle freed claims of another instance whose
	// lease expired: that instance is presumed dead or hung.
	OnVoided func(Voided)
}

// Voided is a claim this instance's maintenance freed from an expired owner.
type Voided struct {
	ServiceID string
	Owner     uuid.UUID
	Epoch     int64
	Phase     string // voided_idle (past expiry_1, idle) | voided_expired (past expiry_2)
}

// withDefaults returns a copy with every zero knob filled in from the ones set.
func (c Config) withDefaults() Config {
	if c.InstanceID == uuid.Nil {
		c.InstanceID = uuid.New()
	}
	if c.Host == "" {
		c.Host, _ = os.Hostname()
	}
	if c.Name == "" {
		c.Name = fmt.Sprintf("%s-%d", c.Host, os.Getpid())
	}
	c.Expiry1 = cmp.Or(c.Expiry1, Expiry1Default)
	c.RenewInterval = cmp.Or(c.RenewInterval, min(RenewIntervalDefault, c.Expiry1/6))
	c.LocalDeadline = cmp.Or(c.LocalDeadline, 2*c.Expiry1/3)
	c.Expiry2 = cmp.Or(c.Expiry2, 4*c.Expiry1)
	c.StopTime = cmp.Or(c.StopTime, c.Expiry1/10)
	c.Margin = cmp.Or(c.Margin, c.Expiry1/10)
	c.MaxSubmission = cmp.Or(c.MaxSubmission, min(MaxSubmissionDefault, c.Expiry2-c.LocalDeadline-c.Margin))
	c.MaxSerializationRetries = cmp.Or(c.MaxSerializationRetries, MaxSerializationTries)
	c.PruneAfter = cmp.Or(c.PruneAfter, 10*c.Expiry2)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Timings is the resolved set of timing knobs, after defaults.
type Timings struct {
	RenewInterval, LocalDeadline, Expiry1, Expiry2, MaxSubmission, StopTime, Margin time.Duration
}

// Resolve applies the defaults and checks every rule, returning the timings in force.
func (c Config) Resolve() (Timings, error) {
	r := c.withDefaults()
	return r.timings(), r.validate()
}

func (c Config) timings() Timings {
	return Timings{c.RenewInterval, c.LocalDeadline, c.Expiry1, c.Expiry2, c.MaxSubmission, c.StopTime, c.Margin}
}

// validate checks the timing rules of DESIGN 4.8 on a Config with defaults applied. Each
// error names the rule and the values.
func (c Config) validate() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	for _, k := range []struct {
		name string
		d    time.Duration
	}{
		{"renew interval (R)", c.RenewInterval}, {"local deadline (D)", c.LocalDeadline},
		{"expiry-1 (T1)", c.Expiry1}, {"expiry-2 (T2)", c.Expiry2},
		{"max submission time (S)", c.MaxSubmission}, {"stop time", c.StopTime}, {"margin", c.Margin},
	} {
		if k.d <= 0 {
			bad("%s must be positive, got %s", k.name, k.d)
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if c.RenewInterval > c.Expiry1/3 {
		bad("renew interval R <= T1/3 violated: R = %s, T1 = %s (T1/3 = %s)", c.RenewInterval, c.Expiry1, c.Expiry1/3)
	}
	if c.LocalDeadline < 2*c.RenewInterval {
		bad("local deadline D >= 2R violated: D = %s, R = %s (2R = %s)", c.LocalDeadline, c.RenewInterval, 2*c.RenewInterval)
	}
	if c.LocalDeadline+c.StopTime >= c.Expiry1 {
		bad("D + stop time < T1 violated: D = %s + stop time = %s is %s, T1 = %s", c.LocalDeadline, c.StopTime, c.LocalDeadline+c.StopTime, c.Expiry1)
	}
	if c.Expiry2 <= c.Expiry1 {
		bad("T2 > T1 violated: T2 = %s, T1 = %s", c.Expiry2, c.Expiry1)
	}
	if need := c.LocalDeadline + c.MaxSubmission + c.Margin; c.Expiry2 < need {
		bad("T2 >= D + S + margin violated: T2 = %s, D = %s + S = %s + margin = %s is %s", c.Expiry2, c.LocalDeadline, c.MaxSubmission, c.Margin, need)
	}
	if c.ShareSlack < 0 {
		bad("share slack must not be negative, got %d", c.ShareSlack)
	}
	if c.MaxSerializationRetries < 0 {
		bad("max serialization retries must not be negative, got %d", c.MaxSerializationRetries)
	}
	if len(c.Name) > 200 {
		bad("instance name is %d bytes; at most 200 allowed", len(c.Name))
	}
	if len(errs) > 0 {
		return fmt.Errorf("invalid claim timings: %w", errors.Join(errs...))
	}
	return nil
}
