package claims

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
)

// Defaults for the timing knobs (docs/claims.md, "Timing rules"). A knob left at zero follows from the ones set;
// see Config.withDefaults.
const (
	RenewIntervalDefault  = 5 * time.Second   // R
	LocalDeadlineDefault  = 20 * time.Second  // D
	Expiry1Default        = 30 * time.Second  // T1
	MaxSubmissionDefault  = 60 * time.Second  // S
	Expiry2Default        = 120 * time.Second // T2
	MaxSerializationTries = 20
	ChunkSizeDefault      = 1000
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
	// MaxSerializationRetries bounds the retries of one claim-cycle statement, of Register and
	// of a WriteTx transaction after a transient conflict (SQLSTATE 40001, 40P01, 55P03). Zero
	// means 20.
	MaxSerializationRetries int
	// ChunkSize bounds the rows one claim-cycle statement voids, acquires or drops; a cycle
	// runs as many chunks as it needs (each skips rows others have locked), so no statement
	// holds many row locks for long. Zero means 1000.
	ChunkSize int
	// DropIdleAfter: the claim rows of this instance's service_ids that have had no
	// unfinished batch for this long (since the last recorded POST outcome, or since the
	// claim was taken) are deleted, so that the engine's cost follows the keys with work, not
	// every key ever seen. The next enqueue of such a service_id creates its row again, and
	// epochs come from one global sequence, so none is ever reused. Zero (the default) never
	// drops a row; use it for claims-only users whose work is not in the batches table.
	DropIdleAfter time.Duration
	// RequireSyncStandby: take no new work while the primary commits without waiting for a
	// synchronous standby (synchronous_standby_names empty, or synchronous_commit off or
	// local), since a failover then may lose commits, epochs included. False (the default
	// here; the daemon turns it on for multi-host URLs) only checks, after a change of
	// timeline, that nothing this instance committed was lost (see Refusal).
	RequireSyncStandby bool
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
	// Progress, when set, is asked before each lease renewal whether the instance's work on
	// its claims moves. While it returns an error the lease is not renewed: the local
	// deadline then fences the instance (its work on every claim stops) and its claims pass
	// to live peers at expiry, as for an instance that cannot reach the database. Renewal
	// goes on once it returns nil. The lease loop's own connection keeps the lease alive
	// whatever else the instance does; this is how an instance whose data path is stuck (a
	// starved pool, a hung worker) gives its claims up. It must not block. A refusal counts
	// as a stall (Stats.Stalls) only while the database answers the lease's own connection;
	// when it does not, the instance is cut off rather than stuck, and the refusal counts as
	// a failed renewal (Stats.RenewErrors).
	Progress func() error

	// KnobNames, when set, is how errors call the timing knobs the caller's user sets, keyed
	// by field name ("Expiry2": "--expiry-2"). A knob without a name is called by its field
	// name. When a rule fails on a value the caller did not set, the error says which values
	// it was derived from, which of them were set, and which knob to set instead.
	KnobNames map[string]string

	// given records which timing knobs were set before withDefaults filled in the others.
	given map[string]bool
}

// timingKnobs lists the timing knobs in a fixed order, each with its symbol (docs/claims.md)
// and, for a knob left unset, how withDefaults derives it and from which knobs.
var timingKnobs = []struct {
	field, symbol, rule string
	from                []string
}{
	{"Expiry1", "T1", "default", nil},
	{"RenewInterval", "R", "min(5s, T1/6)", []string{"Expiry1"}},
	{"LocalDeadline", "D", "2/3 of T1", []string{"Expiry1"}},
	{"Expiry2", "T2", "4 x T1", []string{"Expiry1"}},
	{"StopTime", "stop time", "T1/10", []string{"Expiry1"}},
	{"Margin", "margin", "T1/10", []string{"Expiry1"}},
	{"MaxSubmission", "S", "min(60s, T2 - D - margin)", []string{"Expiry2", "LocalDeadline", "Margin"}},
}

// knob returns a timing knob's value by field name.
func (c Config) knob(field string) time.Duration {
	switch field {
	case "RenewInterval":
		return c.RenewInterval
	case "LocalDeadline":
		return c.LocalDeadline
	case "Expiry1":
		return c.Expiry1
	case "Expiry2":
		return c.Expiry2
	case "MaxSubmission":
		return c.MaxSubmission
	case "StopTime":
		return c.StopTime
	case "Margin":
		return c.Margin
	}
	panic("claims: unknown timing knob " + field)
}

// knobName is how the caller's user knows a knob.
func (c Config) knobName(field string) string {
	return cmp.Or(c.KnobNames[field], field)
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
	c = c.recordGiven()
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
	c.ChunkSize = cmp.Or(c.ChunkSize, ChunkSizeDefault)
	c.PruneAfter = cmp.Or(c.PruneAfter, 10*c.Expiry2)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// recordGiven notes which timing knobs are set, once, before defaults are applied.
func (c Config) recordGiven() Config {
	if c.given != nil {
		return c
	}
	c.given = map[string]bool{}
	for _, k := range timingKnobs {
		c.given[k.field] = c.knob(k.field) != 0
	}
	return c
}

// Timings is the resolved set of timing knobs, after defaults.
type Timings struct {
	RenewInterval, LocalDeadline, Expiry1, Expiry2, MaxSubmission, StopTime, Margin time.Duration
}

// Resolve applies the defaults and checks every rule, returning the Config an Engine would
// use; its Timings are the timings in force.
func (c Config) Resolve() (Config, error) {
	c = c.withDefaults()
	return c, c.validate()
}

// Timings is c's timing knobs: the timings in force when c was returned by Resolve.
func (c Config) Timings() Timings {
	return Timings{c.RenewInterval, c.LocalDeadline, c.Expiry1, c.Expiry2, c.MaxSubmission, c.StopTime, c.Margin}
}

// validate checks the timing rules (docs/claims.md, "Timing rules") on a Config with defaults applied. Each
// error names the rule and the values, and, when the rule failed on values the caller did not
// set, where they came from (see explain).
func (c Config) validate() error {
	var errs []error
	bad := func(knobs []string, format string, a ...any) {
		errs = append(errs, fmt.Errorf(format+c.explain(knobs), a...))
	}
	for _, k := range []struct {
		field, name string
	}{
		{"RenewInterval", "renew interval (R)"}, {"LocalDeadline", "local deadline (D)"},
		{"Expiry1", "expiry-1 (T1)"}, {"Expiry2", "expiry-2 (T2)"},
		{"MaxSubmission", "max submission time (S)"}, {"StopTime", "stop time"}, {"Margin", "margin"},
	} {
		if d := c.knob(k.field); d <= 0 {
			bad([]string{k.field}, "%s must be positive, got %s", k.name, d)
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if c.RenewInterval > c.Expiry1/3 {
		bad([]string{"RenewInterval", "Expiry1"}, "renew interval R <= T1/3 violated: R = %s, T1 = %s (T1/3 = %s)", c.RenewInterval, c.Expiry1, c.Expiry1/3)
	}
	if c.LocalDeadline < 2*c.RenewInterval {
		bad([]string{"LocalDeadline", "RenewInterval"}, "local deadline D >= 2R violated: D = %s, R = %s (2R = %s)", c.LocalDeadline, c.RenewInterval, 2*c.RenewInterval)
	}
	if c.LocalDeadline+c.StopTime >= c.Expiry1 {
		bad([]string{"LocalDeadline", "StopTime", "Expiry1"}, "D + stop time < T1 violated: D = %s + stop time = %s is %s, T1 = %s", c.LocalDeadline, c.StopTime, c.LocalDeadline+c.StopTime, c.Expiry1)
	}
	if c.Expiry2 <= c.Expiry1 {
		bad([]string{"Expiry2", "Expiry1"}, "T2 > T1 violated: T2 = %s, T1 = %s", c.Expiry2, c.Expiry1)
	}
	if need := c.LocalDeadline + c.MaxSubmission + c.Margin; c.Expiry2 < need {
		bad([]string{"Expiry2", "LocalDeadline", "MaxSubmission", "Margin"}, "T2 >= D + S + margin violated: T2 = %s, D = %s + S = %s + margin = %s is %s", c.Expiry2, c.LocalDeadline, c.MaxSubmission, c.Margin, need)
	}
	if c.ShareSlack < 0 {
		bad(nil, "share slack must not be negative, got %d", c.ShareSlack)
	}
	if c.MaxSerializationRetries < 0 {
		bad(nil, "max serialization retries must not be negative, got %d", c.MaxSerializationRetries)
	}
	if c.ChunkSize < 0 {
		bad(nil, "chunk size must not be negative, got %d", c.ChunkSize)
	}
	if c.DropIdleAfter < 0 {
		bad(nil, "drop-idle-after must not be negative (zero never drops), got %s", c.DropIdleAfter)
	}
	if len(c.Name) > 200 {
		bad(nil, "instance name is %d bytes; at most 200 allowed", len(c.Name))
	}
	if len(errs) > 0 {
		return fmt.Errorf("invalid claim timings: %w", errors.Join(errs...))
	}
	return nil
}

// explain is appended to a broken rule's message when some of the rule's knobs were not set:
// it walks from them to the values they were derived from, lists the unset ones with their
// derivation, names the set ones, and says what to set instead. It is empty when the caller
// set every knob of the rule (the message already shows their values), or when it is not
// known what was set (validate on a Config that did not pass through withDefaults).
func (c Config) explain(rule []string) string {
	if c.given == nil {
		return ""
	}
	byField := map[string]int{}
	for i, k := range timingKnobs {
		byField[k.field] = i
	}
	var unset, set []string
	seen := map[string]bool{}
	var visit func(field string)
	visit = func(field string) {
		if seen[field] {
			return
		}
		seen[field] = true
		if c.given[field] {
			set = append(set, field)
			return
		}
		unset = append(unset, field)
		for _, from := range timingKnobs[byField[field]].from {
			visit(from)
		}
	}
	for _, f := range rule {
		visit(f)
	}
	if len(unset) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString(". Not set, so from the defaults: ")
	var instead []string
	for i, f := range unset {
		k := timingKnobs[byField[f]]
		if i > 0 {
			b.WriteString(", ")
		}
		if k.from == nil {
			fmt.Fprintf(&b, "%s = %s (%s)", k.symbol, c.knob(f), k.rule)
		} else {
			fmt.Fprintf(&b, "%s = %s = %s", k.symbol, k.rule, c.knob(f))
		}
		if slices.Contains(rule, f) || k.from == nil {
			instead = append(instead, c.knobName(f))
		}
	}
	if len(set) > 0 {
		b.WriteString(". You set ")
		for i, f := range set {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "%s = %s", c.knobName(f), c.knob(f))
		}
		if len(set) > 1 {
			b.WriteString(": change them, or also set ")
		} else {
			b.WriteString(": change it, or also set ")
		}
	} else {
		b.WriteString(". Set ")
	}
	b.WriteString(orList(instead))
	return b.String()
}

// orList joins names as "a", "a or b", "a, b or c".
func orList(names []string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}
