package failover

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// Defaults for the timing knobs: the values in force when every knob is left at zero. A knob
// left at zero follows from the ones set; see Config.Resolve.
const (
	HeartbeatIntervalDefault = time.Second      // N
	PrimaryLeaseDefault      = 3 * time.Second  // 3N
	PatienceDefault          = 5 * time.Second  // lease + 2N
	LockTTLDefault           = 10 * time.Second // 2 x patience
	PollIntervalDefault      = time.Second
)

// Config configures a Node.
type Config struct {
	// Shard names the group of nodes with one primary. Required.
	Shard string
	// NodeID identifies the node; it stays the same across restarts. Required.
	NodeID string
	// Address is the node's private address, handed to replicas in REPLICAOF commands.
	// Empty is allowed (the demo's nodes have made-up ones).
	Address string
	// LastTxnID is the node's progress (the last transaction applied to its data set) when
	// Progress is nil. Higher means more up to date.
	LastTxnID int64
	// Progress, when set, is called on every heartbeat for the current progress.
	Progress func() int64
	// Bootstrap: if the shard does not exist yet, create it with this node as its primary at
	// epoch 1. If it exists, the flag changes nothing: the node follows the recorded decision.
	Bootstrap bool

	// HeartbeatInterval (N) is how often the node rewrites its record and, as primary, renews
	// its lease; a replica checks the primary as often. Zero means 1s, or PrimaryLease/3 when
	// only that is set.
	HeartbeatInterval time.Duration
	// PrimaryLease is how long one heartbeat of the primary keeps its right to act as primary
	// (database clock); locally it stops acting PrimaryLease - Margin after it sent its last
	// successful renewal. Zero means 3 x HeartbeatInterval.
	PrimaryLease time.Duration
	// Patience is how old the primary's last heartbeat may be before a replica starts a
	// failover. Each node adds its own random share of PatienceJitter once, at New, so that
	// replicas rarely start at the same moment. Registrations older than Patience are dead:
	// such nodes are never chosen and get no commands. Zero means PrimaryLease + 2 x
	// HeartbeatInterval.
	Patience time.Duration
	// PatienceJitter bounds the per-node addition to Patience. Zero means Patience/2;
	// negative means none.
	PatienceJitter time.Duration
	// LockTTL is the failover lock's time to live (database clock). The orchestrator renews
	// it every third of it; if it dies, another replica may take over after LockTTL. Zero
	// means 2 x Patience.
	LockTTL time.Duration
	// ConfirmTimeout bounds how long the orchestrator waits for the new primary to take over
	// before it gives up and releases the lock (the decision stays, to be resumed or
	// superseded). Zero means Patience.
	ConfirmTimeout time.Duration
	// PollInterval is how often the command queue is read when no notification arrives (and
	// always, with DisableListen). Zero means 1s.
	PollInterval time.Duration
	// DisableListen turns off LISTEN/NOTIFY: the queue is only polled.
	DisableListen bool
	// Margin absorbs latency and clock-rate differences between the node and the database.
	// Zero means PrimaryLease/10.
	Margin time.Duration

	// Logger receives the node's logs. Nil discards them.
	Logger *slog.Logger
	// OnRole, when set, is called after every change of the node's role or epoch.
	OnRole func(State)
	// OnCommand, when set, is called for every command the node consumed, after the
	// transaction that consumed it committed.
	OnCommand func(Command)
	// AfterDecision, when set, is called by an orchestrator right after it recorded a new
	// decision and before it sends any command, still holding the failover lock. Drills use
	// it to stop an orchestrator in the middle of a failover.
	AfterDecision func(context.Context, Decision)
}

// Resolve applies the defaults and checks every rule, returning the configuration in force
// (without the node's own jitter, which New draws).
func (c Config) Resolve() (Config, error) {
	c = c.withDefaults()
	return c, c.validate()
}

// withDefaults returns a copy with every zero knob filled in from the ones set.
func (c Config) withDefaults() Config {
	if c.HeartbeatInterval == 0 && c.PrimaryLease > 0 {
		c.HeartbeatInterval = c.PrimaryLease / 3
	}
	c.HeartbeatInterval = cmp.Or(c.HeartbeatInterval, HeartbeatIntervalDefault)
	c.PrimaryLease = cmp.Or(c.PrimaryLease, 3*c.HeartbeatInterval)
	c.Patience = cmp.Or(c.Patience, c.PrimaryLease+2*c.HeartbeatInterval)
	c.PatienceJitter = cmp.Or(c.PatienceJitter, c.Patience/2)
	c.LockTTL = cmp.Or(c.LockTTL, 2*c.Patience)
	c.ConfirmTimeout = cmp.Or(c.ConfirmTimeout, c.Patience)
	c.PollInterval = cmp.Or(c.PollInterval, PollIntervalDefault)
	c.Margin = cmp.Or(c.Margin, c.PrimaryLease/10)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// validate checks a Config with defaults applied; each error names the rule and the values.
func (c Config) validate() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if c.Shard == "" {
		bad("shard is required")
	}
	if c.NodeID == "" {
		bad("node id is required")
	}
	for _, k := range []struct {
		name string
		d    time.Duration
	}{
		{"heartbeat interval", c.HeartbeatInterval}, {"primary lease", c.PrimaryLease}, {"patience", c.Patience},
		{"lock ttl", c.LockTTL}, {"confirm timeout", c.ConfirmTimeout}, {"poll interval", c.PollInterval}, {"margin", c.Margin},
	} {
		if k.d <= 0 {
			bad("%s must be positive, got %s", k.name, k.d)
		}
	}
	if len(errs) == 0 {
		if c.HeartbeatInterval > c.PrimaryLease/3 {
			bad("heartbeat interval N <= primary lease/3 violated: N = %s, lease = %s", c.HeartbeatInterval, c.PrimaryLease)
		}
		if c.Margin >= c.PrimaryLease/2 {
			bad("margin < primary lease/2 violated: margin = %s, lease = %s", c.Margin, c.PrimaryLease)
		}
		if c.Patience <= c.PrimaryLease+c.HeartbeatInterval {
			bad("patience > primary lease + N violated: patience = %s, lease = %s, N = %s", c.Patience, c.PrimaryLease, c.HeartbeatInterval)
		}
		if c.LockTTL < 3*c.HeartbeatInterval {
			bad("lock ttl >= 3N violated: lock ttl = %s, N = %s", c.LockTTL, c.HeartbeatInterval)
		}
		if c.LockTTL%time.Millisecond != 0 || c.PrimaryLease%time.Millisecond != 0 || c.Patience%time.Millisecond != 0 {
			bad("lock ttl, primary lease and patience must be whole milliseconds")
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("invalid failover config: %w", errors.Join(errs...))
	}
	return nil
}
