package history

import (
	"context"
	"fmt"

	"github.com/batchclaim/batchclaim/pgdb"
)

// place is where a batch stands in its service_id's order.
type place struct {
	svc      string
	seq, pos int64
	// skip: the batch was revived by a Retry and its place in the order is not recorded
	// (a schema without pos), so no order is judged for it.
	skip bool
}

type places struct {
	byID    map[string]place
	deleted int // batches retention deleted (from the audit)
}

// readPlaces reads each batch's place in its service_id's order: pos where the schema has it
// (a batch revived by a Retry goes to the back of its queue and draws a new pos), seq
// otherwise, and then a revived batch is not judged. Batches retention deleted are read from
// the audit when it was installed.
func readPlaces(ctx context.Context, q pgdb.Querier) (places, error) {
	out := places{byID: map[string]place{}}
	var hasPos bool
	if err := q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM information_schema.columns
		WHERE table_schema = 'batchclaim' AND table_name = 'batches' AND column_name = 'pos')`).Scan(&hasPos); err != nil {
		return out, fmt.Errorf("read batch order: %w", err)
	}
	pos := "b.seq"
	if hasPos {
		pos = "b.pos"
	}
	sqls := []string{`SELECT b.batch_id, b.service_id, b.seq, ` + pos + `, EXISTS (SELECT 1 FROM batchclaim.batch_transitions t
		WHERE t.seq = b.seq AND t.detail = 'retry' AND t.instance_id IS NULL AND t.to_state = 'NEW'), false
		FROM batchclaim.batches b`}
	audit, err := audited(ctx, q)
	if err != nil {
		return out, err
	}
	if audit {
		sqls = append(sqls, `SELECT d.rec->>'batch_id', d.rec->>'service_id', d.seq, COALESCE((d.rec->>'pos')::bigint, d.seq),
			EXISTS (SELECT 1 FROM history_audit.deleted_history t WHERE t.tbl = 'batch_transitions' AND t.seq = d.seq
			        AND t.rec->>'detail' = 'retry' AND t.rec->>'instance_id' IS NULL AND t.rec->>'to_state' = 'NEW'), true
			FROM history_audit.deleted_batches d`)
	}
	for _, sql := range sqls {
		rows, err := q.Query(ctx, sql)
		if err != nil {
			return out, fmt.Errorf("read batch order: %w", err)
		}
		for rows.Next() {
			var id string
			var p place
			var retried, deleted bool
			if err := rows.Scan(&id, &p.svc, &p.seq, &p.pos, &retried, &deleted); err != nil {
				rows.Close()
				return out, fmt.Errorf("read batch order: %w", err)
			}
			p.skip = retried && !hasPos
			out.byID[id] = p
			if deleted {
				out.deleted++
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return out, fmt.Errorf("read batch order: %w", err)
		}
	}
	return out, nil
}

// moreExplainers adds to DuplicateExplainers' count what it cannot see: each Retry of an
// INVALID or DISCARDED batch (its next POST repeats one the ledger had taken), and the
// explainers of batches retention deleted (from the audit), counted as DuplicateExplainers
// counts them.
func moreExplainers(ctx context.Context, q pgdb.Querier, explainers map[string]int) error {
	sqls := []string{`SELECT b.batch_id, count(*) FROM batchclaim.batch_transitions t JOIN batchclaim.batches b ON b.seq = t.seq
		WHERE t.detail = 'retry' AND t.instance_id IS NULL AND t.from_state IN ('INVALID', 'DISCARDED')
		GROUP BY b.batch_id`}
	audit, err := audited(ctx, q)
	if err != nil {
		return err
	}
	if audit {
		sqls = append(sqls, `SELECT d.rec->>'batch_id', count(*) FROM history_audit.deleted_batches d
			JOIN history_audit.deleted_history h ON h.seq = d.seq
			WHERE (h.tbl = 'submission_attempts' AND (h.rec->>'outcome' IS NULL OR h.rec->>'outcome' = 'unknown'))
			   OR (h.tbl = 'batch_transitions' AND h.rec->>'to_state' = 'UNKNOWN' AND h.rec->>'from_state' IN ('PENDING', 'VALID'))
			   OR (h.tbl = 'batch_transitions' AND h.rec->>'detail' = 'retry' AND h.rec->>'instance_id' IS NULL
			       AND h.rec->>'from_state' IN ('INVALID', 'DISCARDED'))
			GROUP BY 1`)
	}
	for _, sql := range sqls {
		rows, err := q.Query(ctx, sql)
		if err != nil {
			return fmt.Errorf("read duplicate explainers: %w", err)
		}
		for rows.Next() {
			var id string
			var n int
			if err := rows.Scan(&id, &n); err != nil {
				rows.Close()
				return fmt.Errorf("read duplicate explainers: %w", err)
			}
			explainers[id] += n
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("read duplicate explainers: %w", err)
		}
	}
	return nil
}
