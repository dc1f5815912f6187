package chaos

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"time"
)

// The fault kinds, by the names the report counts them under.
const (
	KindSIGKILL            = "sigkill"
	KindSIGSTOP            = "sigstop"
	KindLinkCut            = "link_cut"
	KindLinkBlackhole      = "link_blackhole"
	KindLinkFreeze         = "link_freeze"
	KindLinkLatency        = "link_latency"
	KindTerminateBackend   = "terminate_backend"
	KindPostgresRestart    = "postgres_restart"
	KindPostgresFailover   = "postgres_failover"
	KindLedger429          = "ledger_429"
	KindLedger503          = "ledger_503"
	KindLedgerTimeout      = "ledger_timeout"
	KindLedgerDropResponse = "ledger_drop_response"
	KindLedgerHiddenIntake = "ledger_hidden_intake"
	KindLedgerRestart      = "ledger_restart"
	KindConcurrentEnqueue  = "concurrent_enqueue"
	KindClockSkew          = "clock_skew"
	// The faults of a Patroni cluster (--cluster patroni); see patroni.go.
	KindPatroniKillPostmaster = "patroni_kill_postmaster"
	KindPatroniKillPatroni    = "patroni_kill_patroni"
	KindPatroniSwitchover     = "patroni_switchover"
	KindPatroniFailover       = "patroni_failover"
	KindPatroniDCSCut         = "patroni_dcs_cut"
	KindEtcdRestart           = "etcd_restart"
)

// The clusters a run can own.
const (
	// ClusterLocal is a primary and a synchronous standby that the harness itself promotes.
	ClusterLocal = "local"
	// ClusterPatroni is etcd and three Patroni members in synchronous_mode.
	ClusterPatroni = "patroni"
)

// The invariants, by the names the report counts violations under.
const (
	Lost                  = "lost"
	OrderViolations       = "order_violations"
	DoubleOutstanding     = "double_outstanding"
	DoubleOwner           = "double_owner"
	EpochRegressions      = "epoch_regressions"
	StaleWritesAccepted   = "stale_writes_accepted"
	UnexplainedDuplicates = "unexplained_duplicates"
	SlowTakeovers         = "slow_takeovers"
	Unbalanced            = "unbalanced"
	HistoryGaps           = "history_gaps"
	StalledWork           = "stalled_work"
	SlowWakeups           = "slow_wakeups"
	BulkReports           = "bulk_reports"
	// The key's promise, checked from the jobs' recorded history (testkit/history).
	DoubleInFlight      = "double_in_flight"
	LostJobs            = "lost_jobs"
	TerminalRegressions = "terminal_regressions"
	RepeatedAttempts    = "repeated_attempts"
	RowMarks            = "row_marks"
)

// The operations a run carries out beside the faults (ops.go), by the names the report
// counts them under.
const (
	OpRetry         = "retry"
	OpCancel        = "cancel"
	OpCancelRunning = "cancel_running" // a batch while its POST runs (INFLIGHT)
	OpRunAt         = "run_at"
	OpResume        = "resume"
	OpRetentionOn   = "retention_on"
	OpDropIdleOn    = "drop_idle_on"
	OpPoolHog       = "pool_hog"
	OpLongSnapshot  = "long_snapshot"
	OpClockDrift    = "clock_drift"
	OpHeldEnqueue   = "held_enqueue"
	OpClockRate     = "clock_rate"
	OpUpgrade       = "upgrade" // the latest migration applied while the instances work
)

// Operations returns every operation kind.
func Operations() []string {
	return []string{OpRetry, OpCancel, OpCancelRunning, OpRunAt, OpResume, OpRetentionOn, OpDropIdleOn, OpPoolHog, OpLongSnapshot, OpClockDrift, OpHeldEnqueue, OpClockRate, OpUpgrade}
}

// The values of Config.HaltOnInvalid.
const (
	HaltFromSeed = "auto" // on for even seeds, off for odd ones
	HaltOn       = "on"
	HaltOff      = "off"
)

// hostKinds are the faults of processes, links and Postgres: one at a time, so that a slow
// takeover is never blamed on two faults at once.
var hostKinds = []string{KindSIGKILL, KindSIGSTOP, KindLinkCut, KindLinkBlackhole, KindLinkFreeze, KindLinkLatency,
	KindTerminateBackend, KindClockSkew, KindPostgresRestart, KindPostgresFailover, KindPatroniKillPostmaster,
	KindPatroniKillPatroni, KindPatroniSwitchover, KindPatroniFailover, KindPatroniDCSCut, KindEtcdRestart}

// localKinds need the local cluster, patroniKinds a Patroni cluster; a run on another
// database skips them.
var (
	localKinds   = []string{KindPostgresRestart, KindPostgresFailover}
	patroniKinds = []string{KindPatroniKillPostmaster, KindPatroniKillPatroni, KindPatroniSwitchover,
		KindPatroniFailover, KindPatroniDCSCut, KindEtcdRestart}
)

// ledgerKinds are the faults of the ledger and of the clients that enqueue; they run beside
// the host faults.
var ledgerKinds = []string{KindLedger429, KindLedger503, KindLedgerTimeout, KindLedgerDropResponse,
	KindLedgerHiddenIntake, KindLedgerRestart, KindConcurrentEnqueue}

// Kinds returns every fault kind.
func Kinds() []string { return slices.Concat(hostKinds, ledgerKinds) }

// Invariants returns every invariant the check counts.
func Invariants() []string {
	return []string{Lost, OrderViolations, DoubleOutstanding, DoubleOwner, EpochRegressions,
		StaleWritesAccepted, UnexplainedDuplicates, SlowTakeovers, Unbalanced, HistoryGaps, StalledWork, SlowWakeups, BulkReports,
		DoubleInFlight, LostJobs, TerminalRegressions, RepeatedAttempts, RowMarks}
}

// Defaults applied to zero Config fields.
const (
	DurationDefault   = 90 * time.Second
	InstancesDefault  = 4
	ServiceIDsDefault = 24
	BatchesDefault    = 5
	// The instances' timings: R, T1 and T2.
	RenewDefault   = 200 * time.Millisecond
	Expiry1Default = 2 * time.Second
	Expiry2Default = 8 * time.Second
	// AllowanceDefault is added to every takeover bound: the time a loaded machine may take to
	// schedule the processes involved (a cycle that should start now starts this much later).
	AllowanceDefault = 1500 * time.Millisecond
	// QuiesceDefault bounds the wait for every batch to finish once the faults stopped.
	QuiesceDefault = 3 * time.Minute
	// BalanceWaitDefault bounds the wait for balanced claims once every batch finished.
	BalanceWaitDefault = 30 * time.Second
)

// halts reports whether the run's instances halt a service_id after an INVALID batch.
func (c Config) halts() bool {
	return c.HaltOnInvalid == HaltOn || (c.HaltOnInvalid == HaltFromSeed && c.Seed%2 == 0)
}

// Config shapes one chaos run.
type Config struct {
	// Duration is how long faults are injected and batches arrive. Zero means 90s.
	Duration time.Duration
	// Instances is the number of `run` processes kept running. Zero means 4; at least 3.
	Instances int
	// ServiceIDs is the number of service_ids. Zero means 24.
	ServiceIDs int
	// Batches is the number of batches per service_id stored before the start; more keep
	// arriving during the run. Zero means 5.
	Batches int
	// Seed chooses the faults, their victims and their timing. Zero means 1 (the command
	// picks a random one and prints it).
	Seed int64
	// Kinds restricts the faults to these kinds. Nil means every kind.
	Kinds []string
	// Ops restricts the operations to these kinds. Nil means every kind; empty (not nil)
	// means none.
	Ops []string
	// HaltOnInvalid is whether the instances run with --halt-on-invalid: HaltOn, HaltOff, or
	// HaltFromSeed (on for even seeds). Empty means HaltFromSeed. Operation resume needs it.
	HaltOnInvalid string
	// DatabaseURL, when set, is an existing server to run on (a scratch database is created
	// there and dropped afterwards); postgres_restart and postgres_failover are then skipped.
	// Empty means a throwaway cluster with a synchronous standby from local binaries.
	DatabaseURL string
	// Cluster is the cluster a run owns when DatabaseURL is empty: ClusterLocal (the
	// default) or ClusterPatroni. Each cluster's own faults are skipped on the other.
	Cluster string
	// AsyncStandby makes the throwaway cluster's standby asynchronous and holds it a second
	// behind before each failover: a demonstration that the guarantees then break (expect
	// epoch_regressions and history_gaps). False (the default) is the supported setup.
	AsyncStandby bool
	// Binary is the batchclaim executable the instances run. Required.
	Binary string
	// Renew, Expiry1 and Expiry2 are the instances' R, T1 and T2. Zero means 200ms, 2s, 8s.
	Renew, Expiry1, Expiry2 time.Duration
	// Allowance is the scheduling allowance added to every takeover bound. Zero means 1.5s.
	Allowance time.Duration
	// DropIdleAfter is the instances' --drop-idle-after: the claim rows of service_ids with
	// no unfinished batch for this long are deleted, and come back with their next batch.
	// Zero (the default) keeps every row. With it set, only the claims of service_ids that
	// had unfinished work when the fault hit are judged for takeover: an idle one's row may
	// be dropped instead of taken.
	DropIdleAfter time.Duration
	// Quiesce bounds the wait for every batch to finish after the faults. Zero means 3m.
	Quiesce time.Duration
	// LogDir receives the instances' logs. Empty means a new temporary directory.
	LogDir string
	// Progress receives one line per event and a status line every few seconds. Nil
	// discards them.
	Progress io.Writer
	// Logger receives the harness's own diagnostics. Nil discards them.
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	c.Duration = cmp.Or(c.Duration, DurationDefault)
	c.Instances = cmp.Or(c.Instances, InstancesDefault)
	c.ServiceIDs = cmp.Or(c.ServiceIDs, ServiceIDsDefault)
	c.Batches = cmp.Or(c.Batches, BatchesDefault)
	c.Seed = cmp.Or(c.Seed, 1)
	c.Renew = cmp.Or(c.Renew, RenewDefault)
	c.Expiry1 = cmp.Or(c.Expiry1, Expiry1Default)
	c.Expiry2 = cmp.Or(c.Expiry2, Expiry2Default)
	c.Allowance = cmp.Or(c.Allowance, AllowanceDefault)
	c.Quiesce = cmp.Or(c.Quiesce, QuiesceDefault)
	c.Cluster = cmp.Or(c.Cluster, ClusterLocal)
	if c.Kinds == nil {
		c.Kinds = Kinds()
	}
	if c.Ops == nil {
		c.Ops = Operations()
	}
	c.HaltOnInvalid = cmp.Or(c.HaltOnInvalid, HaltFromSeed)
	if c.Progress == nil {
		c.Progress = io.Discard
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

func (c Config) validate() error {
	var errs []string
	bad := func(format string, a ...any) { errs = append(errs, fmt.Sprintf(format, a...)) }
	if c.Duration < 10*time.Second {
		bad("duration %v is shorter than 10s", c.Duration)
	}
	if c.Instances < 3 {
		bad("instances %d: at least 3 (one may be down while two share the work)", c.Instances)
	}
	if c.ServiceIDs < 1 || c.Batches < 1 {
		bad("service-ids and batches must be at least 1")
	}
	if c.Binary == "" {
		bad("no batchclaim binary to run instances of")
	}
	if c.Renew <= 0 || c.Expiry1 < 3*c.Renew || c.Expiry2 <= c.Expiry1 {
		bad("timings: want 0 < 3 x renew (%v) <= expiry-1 (%v) < expiry-2 (%v)", c.Renew, c.Expiry1, c.Expiry2)
	}
	if c.Cluster != ClusterLocal && c.Cluster != ClusterPatroni {
		bad("cluster %q: want %s or %s", c.Cluster, ClusterLocal, ClusterPatroni)
	}
	if c.Cluster == ClusterPatroni && c.DatabaseURL != "" {
		bad("cluster %s starts its own cluster: give no database URL", c.Cluster)
	}
	if c.Cluster == ClusterPatroni && c.AsyncStandby {
		bad("async-standby is a demonstration of the local cluster only")
	}
	if c.DropIdleAfter < 0 {
		bad("drop-idle-after %v is negative", c.DropIdleAfter)
	}
	known := Kinds()
	for _, k := range c.Kinds {
		if !slices.Contains(known, k) {
			bad("unknown fault kind %q (want one of %s)", k, strings.Join(known, ", "))
		}
	}
	for _, k := range c.Ops {
		if !slices.Contains(Operations(), k) {
			bad("unknown operation %q (want one of %s)", k, strings.Join(Operations(), ", "))
		}
	}
	if !slices.Contains([]string{HaltFromSeed, HaltOn, HaltOff}, c.HaltOnInvalid) {
		bad("halt-on-invalid %q: want %s, %s or %s", c.HaltOnInvalid, HaltFromSeed, HaltOn, HaltOff)
	}
	if len(errs) > 0 {
		return errors.New("chaos config: " + strings.Join(errs, "; "))
	}
	return nil
}
