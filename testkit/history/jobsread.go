package history

import (
	"context"
	"fmt"
	"time"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/pgdb"
)

// jobChangesSQL reads every recorded state change of the stored batches: the rows of
// batch_transitions (a Retry's is an operator's write, without an instance, detail 'retry'),
// each POST's mark and outcome from the attempt log, and the attempt a batch row carries
// (batch_row_attempts). Every time is the now() of the writing transaction.
const jobChangesSQL = `
SELECT t.seq, COALESCE(t.from_state, ''), t.to_state, t.at, (t.detail IS NOT DISTINCT FROM 'retry' AND t.instance_id IS NULL), 'transition'
FROM batchclaim.batch_transitions t
UNION ALL
SELECT a.seq, a.from_state, 'INFLIGHT', a.started_at, false, 'attempt'
FROM batchclaim.submission_attempts a WHERE a.from_state IS NOT NULL
UNION ALL
SELECT a.seq, 'INFLIGHT', a.to_state, a.finished_at, false, 'outcome'
FROM batchclaim.submission_attempts a WHERE a.from_state IS NOT NULL AND a.to_state IS NOT NULL AND a.finished_at IS NOT NULL
UNION ALL
SELECT r.seq, r.from_state, 'INFLIGHT', r.started_at, false, 'batch row'
FROM batchclaim.batch_row_attempts r
UNION ALL
SELECT r.seq, 'INFLIGHT', r.to_state, r.finished_at, false, 'batch row outcome'
FROM batchclaim.batch_row_attempts r WHERE r.to_state IS NOT NULL`

// deletedChangesSQL reads the same from the audit's copies of deleted rows; a deleted batch
// row's own attempt is read as batch_row_attempts reads it.
const deletedChangesSQL = `
WITH t AS (SELECT seq, rec FROM history_audit.deleted_history WHERE tbl = 'batch_transitions'),
     a AS (SELECT seq, rec FROM history_audit.deleted_history WHERE tbl = 'submission_attempts'),
     b AS (SELECT seq, rec FROM history_audit.deleted_batches
           WHERE rec->>'state' IN ('INFLIGHT', 'COMMITTED') AND rec->>'attempt_from' IS NOT NULL AND rec->>'claimant' IS NOT NULL
             AND NOT EXISTS (SELECT 1 FROM history_audit.deleted_history x
                             WHERE x.tbl = 'submission_attempts' AND x.seq = deleted_batches.seq
                               AND (x.rec->>'started_at')::timestamptz = (deleted_batches.rec->>'submitted_at')::timestamptz))
SELECT seq, COALESCE(rec->>'from_state', ''), rec->>'to_state', (rec->>'at')::timestamptz,
       (rec->>'detail' IS NOT DISTINCT FROM 'retry' AND rec->>'instance_id' IS NULL), 'transition' FROM t
UNION ALL
SELECT seq, rec->>'from_state', 'INFLIGHT', (rec->>'started_at')::timestamptz, false, 'attempt' FROM a WHERE rec->>'from_state' IS NOT NULL
UNION ALL
SELECT seq, 'INFLIGHT', rec->>'to_state', (rec->>'finished_at')::timestamptz, false, 'outcome' FROM a
WHERE rec->>'from_state' IS NOT NULL AND rec->>'to_state' IS NOT NULL AND rec->>'finished_at' IS NOT NULL
UNION ALL
SELECT seq, rec->>'attempt_from', 'INFLIGHT', (rec->>'submitted_at')::timestamptz, false, 'batch row' FROM b
UNION ALL
SELECT seq, 'INFLIGHT', 'COMMITTED', (rec->>'finished_at')::timestamptz, false, 'batch row outcome' FROM b
WHERE rec->>'state' = 'COMMITTED' AND rec->>'finished_at' IS NOT NULL`

// ReadJobs reads the history of every job from the database: the batches stored, their
// recorded changes, and, when InstallAudit ran, the batches retention deleted (with their
// changes) and the attempt numbers each job's marks drew.
func ReadJobs(ctx context.Context, q pgdb.Querier) (JobHistory, error) {
	var h JobHistory
	if err := q.QueryRow(ctx, `SELECT now()`).Scan(&h.End); err != nil {
		return h, fmt.Errorf("read jobs: %w", err)
	}
	audit, err := audited(ctx, q)
	if err != nil {
		return h, err
	}
	jobs := map[int64]*Job{}
	var order []int64
	add := func(j Job) {
		if audit {
			j.Attempts = []int{}
		}
		if _, ok := jobs[j.Seq]; !ok {
			order = append(order, j.Seq)
		}
		jobs[j.Seq] = &j
	}
	rows, err := q.Query(ctx, `SELECT b.seq, b.service_id, b.batch_id, b.state, b.created_at,
		EXISTS (SELECT 1 FROM batchclaim.service_id_claims c WHERE c.service_id = b.service_id),
		b.unfinished, b.finished_at IS NOT NULL
		FROM batchclaim.batches b ORDER BY b.seq`)
	if err != nil {
		return h, fmt.Errorf("read jobs: %w", err)
	}
	for rows.Next() {
		j := Job{Row: &RowMarks{}}
		var st string
		if err := rows.Scan(&j.Seq, &j.Service, &j.BatchID, &st, &j.Stored, &j.Queued, &j.Row.Unfinished, &j.Row.FinishedAt); err != nil {
			rows.Close()
			return h, fmt.Errorf("read jobs: %w", err)
		}
		j.Final = batchclaim.State(st)
		add(j)
	}
	if err := rows.Err(); err != nil {
		return h, fmt.Errorf("read jobs: %w", err)
	}
	changeSQL := []string{jobChangesSQL}
	if audit {
		rows, err := q.Query(ctx, `SELECT seq, rec->>'service_id', rec->>'batch_id', rec->>'state', (rec->>'created_at')::timestamptz, at,
				(rec->>'unfinished')::bool, rec->>'finished_at' IS NOT NULL
			FROM history_audit.deleted_batches ORDER BY seq`)
		if err != nil {
			return h, fmt.Errorf("read deleted jobs: %w", err)
		}
		for rows.Next() {
			j := Job{Row: &RowMarks{}}
			var st string
			if err := rows.Scan(&j.Seq, &j.Service, &j.BatchID, &st, &j.Stored, &j.Deleted, &j.Row.Unfinished, &j.Row.FinishedAt); err != nil {
				rows.Close()
				return h, fmt.Errorf("read deleted jobs: %w", err)
			}
			j.Final = batchclaim.State(st)
			add(j)
		}
		if err := rows.Err(); err != nil {
			return h, fmt.Errorf("read deleted jobs: %w", err)
		}
		changeSQL = append(changeSQL, deletedChangesSQL)
	}
	for _, sql := range changeSQL {
		if err := readChanges(ctx, q, sql, jobs); err != nil {
			return h, err
		}
	}
	if audit {
		if err := readAttempts(ctx, q, jobs); err != nil {
			return h, err
		}
	}
	for _, seq := range order {
		h.Jobs = append(h.Jobs, *jobs[seq])
	}
	return h, nil
}

func readChanges(ctx context.Context, q pgdb.Querier, sql string, jobs map[int64]*Job) error {
	rows, err := q.Query(ctx, sql)
	if err != nil {
		return fmt.Errorf("read job changes: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var seq int64
		var from, to, src string
		var at time.Time
		var retry bool
		if err := rows.Scan(&seq, &from, &to, &at, &retry, &src); err != nil {
			return fmt.Errorf("read job changes: %w", err)
		}
		if j := jobs[seq]; j != nil {
			j.Changes = append(j.Changes, JobChange{At: at, From: batchclaim.State(from), To: batchclaim.State(to), Retry: retry, Src: src})
		}
	}
	return rows.Err()
}

// readAttempts reads each job's attempt numbers: the count after each change that raised it
// (an in-flight mark), in commit order, and each change that set it back.
func readAttempts(ctx context.Context, q pgdb.Querier, jobs map[int64]*Job) error {
	rows, err := q.Query(ctx, `SELECT seq, old_count, new_count FROM history_audit.attempt_counts ORDER BY id`)
	if err != nil {
		return fmt.Errorf("read attempt numbers: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var seq int64
		var before, after int
		if err := rows.Scan(&seq, &before, &after); err != nil {
			return fmt.Errorf("read attempt numbers: %w", err)
		}
		j := jobs[seq]
		switch {
		case j == nil:
		case after > before:
			j.Attempts = append(j.Attempts, after)
		default:
			j.Resets = append(j.Resets, [2]int{before, after})
		}
	}
	return rows.Err()
}
