package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/batchclaim/batchclaim/claims"
	"github.com/batchclaim/batchclaim/pgdb"
)

// multiHost reports whether a database URL lists several hosts (a primary and standbys, with
// target_session_attrs picking the primary): the setups where a failover can happen under the
// instances, so run requires a synchronous standby unless told otherwise.
func multiHost(dbURL string) bool {
	cfg, err := pgconn.ParseConfig(dbURL)
	if err != nil {
		return false
	}
	hosts := map[string]bool{fmt.Sprintf("%s:%d", cfg.Host, cfg.Port): true}
	for _, f := range cfg.Fallbacks {
		hosts[fmt.Sprintf("%s:%d", f.Host, f.Port)] = true
	}
	return len(hosts) > 1
}

// registerGuardMetrics exports the failover guard: whether the instance takes no new work
// now, and how often it began to refuse.
func registerGuardMetrics(reg *prometheus.Registry, e *claims.Engine) {
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "batchclaim_refusing_new_work",
			Help: "1 while the instance takes no new work: the database lost commits in a failover, or has no synchronous standby while --require-sync-standby is set (the log says which)."},
			func() float64 {
				if e.Refusal() != "" {
					return 1
				}
				return 0
			}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "batchclaim_refusals_total",
			Help: "Times the instance began to refuse new work (see batchclaim_refusing_new_work)."},
			func() float64 { return float64(e.Refusals()) }),
	)
}

// databaseStatus is what `status` says of the server the URL reached: its timeline and
// whether its commits wait for a synchronous standby.
type databaseStatus struct {
	Timeline          int64  `json:"timeline"`
	SynchronousCommit string `json:"synchronous_commit"`
	SyncStandbyNames  string `json:"synchronous_standby_names"`
	SyncStandby       bool   `json:"synchronous_standby"`
}

func readDatabaseStatus(ctx context.Context, q pgdb.Querier) (databaseStatus, error) {
	var s databaseStatus
	err := q.QueryRow(ctx, `SELECT ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::bigint,
		current_setting('synchronous_commit'), current_setting('synchronous_standby_names')`).Scan(&s.Timeline, &s.SynchronousCommit, &s.SyncStandbyNames)
	if err != nil {
		return s, fmt.Errorf("read the database's timeline and synchronous standby: %w", err)
	}
	s.SyncStandby = s.SyncStandbyNames != "" && s.SynchronousCommit != "off" && s.SynchronousCommit != "local"
	return s, nil
}

func (s databaseStatus) print(w io.Writer) {
	standby := fmt.Sprintf("commits wait for a synchronous standby (synchronous_standby_names %q, synchronous_commit %s)", s.SyncStandbyNames, s.SynchronousCommit)
	if !s.SyncStandby {
		standby = fmt.Sprintf("NO synchronous standby (synchronous_standby_names %q, synchronous_commit %s): a failover may lose commits; "+
			"instances with --require-sync-standby take no new work", s.SyncStandbyNames, s.SynchronousCommit)
	}
	fmt.Fprintf(w, "database: timeline %d; %s\n", s.Timeline, strings.TrimSpace(standby))
	fmt.Fprintf(w, "  (an instance that found commits lost after a failover takes no new work: see its log and batchclaim_refusing_new_work)\n\n")
}
