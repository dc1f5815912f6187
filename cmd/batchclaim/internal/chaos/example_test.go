package chaos_test

import (
	"fmt"
	"strings"

	"github.com/batchclaim/batchclaim/cmd/batchclaim/internal/chaos"
)

// The names a chaos report counts faults, operations and violations under.
func Example() {
	fmt.Println(strings.Join(chaos.Kinds(), " "))
	fmt.Println(strings.Join(chaos.Operations(), " "))
	fmt.Println(strings.Join(chaos.Invariants(), " "))
	// Output:
	// sigkill sigstop link_cut link_blackhole link_freeze link_latency terminate_backend clock_skew postgres_restart postgres_failover patroni_kill_postmaster patroni_kill_patroni patroni_switchover patroni_failover patroni_dcs_cut etcd_restart ledger_429 ledger_503 ledger_timeout ledger_drop_response ledger_hidden_intake ledger_restart concurrent_enqueue
	// retry cancel cancel_running run_at resume retention_on drop_idle_on pool_hog long_snapshot clock_drift held_enqueue clock_rate upgrade
	// lost order_violations double_outstanding double_owner epoch_regressions stale_writes_accepted unexplained_duplicates slow_takeovers unbalanced history_gaps stalled_work slow_wakeups bulk_reports double_in_flight lost_jobs terminal_regressions repeated_attempts row_marks
}
