package history

import (
	"context"
	"fmt"
	"time"

	"github.com/batchclaim/batchclaim/pgdb"
	"github.com/google/uuid"
)

// WriteReport is what CheckWrites found.
type WriteReport struct {
	// Writes is the number of fenced writes checked: state transitions and POST attempts
	// made by an owner.
	Writes int
	// StaleAccepted counts writes whose (instance, epoch) did not own the service_id when
	// the write committed.
	StaleAccepted int
	Problems      []string
}

// CheckWrites verifies that every status write (a row of batch_transitions) and every
// submission (a row of submission_attempts: its fenced in-flight mark and the fenced write of
// its outcome, which writes the row; or the last attempt a batch row carries while it has no
// row, the view batch_row_attempts: a POST in flight, or the attempt that committed the
// batch) was made by the owner of its service_id with its epoch, while that ownership lasted:
// from the commit of its acquisition to the commit of its end. An attempt is checked over its
// whole life: from its mark's transaction start to the commit of its last write: its
// outcome's (the batch row's xmin for an attempt that committed it), or, when no outcome was
// recorded, its mark's (marked_xid when the adoption of its batch wrote the row; the row's own
// xmin for rows a mark wrote; the batch row's xmin while it is in flight). With track_commit_timestamp on, times are commit
// timestamps; otherwise the write's transaction start, which can only hide a stale write,
// never invent one. With the audit installed (InstallAudit), the writes about batches
// retention deleted are checked too.
func CheckWrites(ctx context.Context, q pgdb.Querier) (WriteReport, error) {
	var r WriteReport
	owns, err := Ownerships(ctx, q)
	if err != nil {
		return r, err
	}
	commitTS, err := tracksCommitTimestamps(ctx, q)
	if err != nil {
		return r, err
	}
	type key struct {
		svc   string
		epoch int64
	}
	byEpoch := map[key]Ownership{}
	for svc, os := range owns {
		for _, o := range os {
			byEpoch[key{svc, o.Epoch}] = o
		}
	}
	tAt, aEnd, bEnd := "t.at", "COALESCE(a.finished_at, a.started_at)", "COALESCE(r.finished_at, r.started_at)"
	if commitTS {
		tAt, aEnd = "COALESCE(pg_xact_commit_timestamp(t.xmin), t.at)", "COALESCE(pg_xact_commit_timestamp(COALESCE(a.marked_xid::xid, a.xmin)), a.finished_at, a.started_at)"
		bEnd = "COALESCE(pg_xact_commit_timestamp(b.xmin), r.finished_at, r.started_at)"
	}
	sql := `
		SELECT 'transition ' || t.from_state || '->' || t.to_state, b.service_id, b.batch_id, t.instance_id, t.epoch, ` + tAt + `, ` + tAt + `
		FROM batchclaim.batch_transitions t JOIN batchclaim.batches b ON b.seq = t.seq
		WHERE t.instance_id IS NOT NULL AND t.epoch IS NOT NULL
		UNION ALL
		SELECT 'attempt ' || a.reason, a.service_id, a.batch_id, a.instance_id, a.epoch, a.started_at, ` + aEnd + `
		FROM batchclaim.submission_attempts a
		UNION ALL
		SELECT 'attempt ' || r.reason, r.service_id, r.batch_id, r.instance_id, r.epoch, r.started_at, ` + bEnd + `
		FROM batchclaim.batch_row_attempts r JOIN batchclaim.batches b ON b.seq = r.seq`
	audit, err := audited(ctx, q)
	if err != nil {
		return r, err
	}
	if audit {
		sql += deletedWritesSQL(commitTS)
	}
	rows, err := q.Query(ctx, sql)
	if err != nil {
		return r, fmt.Errorf("read writes: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var what, svc, batch string
		var inst uuid.UUID
		var epoch int64
		var at, end time.Time
		if err := rows.Scan(&what, &svc, &batch, &inst, &epoch, &at, &end); err != nil {
			return r, err
		}
		r.Writes++
		o, ok := byEpoch[key{svc, epoch}]
		bad := ""
		switch {
		case !ok:
			bad = "no ownership with that epoch"
		case o.Instance != inst:
			bad = fmt.Sprintf("epoch %d was owned by %s", epoch, o.Instance)
		case at.Before(o.From):
			bad = fmt.Sprintf("before the ownership began at %s", o.From.Format(time.StampMicro))
		case !o.To.IsZero() && end.After(o.To):
			bad = fmt.Sprintf("after the ownership ended (%s) at %s", o.End, o.To.Format(time.StampMicro))
		}
		if bad != "" {
			r.StaleAccepted++
			if len(r.Problems) < 20 {
				r.Problems = append(r.Problems, fmt.Sprintf("%s: %s of batch %s by %s@%d at %s: %s",
					svc, what, short(batch), inst, epoch, at.Format(time.StampMicro), bad))
			}
		}
	}
	return r, rows.Err()
}

// deletedWritesSQL reads the same writes of the batches retention deleted, from the audit's
// copies (InstallAudit): their transitions, their attempt rows, and the attempt each batch
// row carried, each timed as for a batch still stored (the copy keeps the writing
// transaction in wrote).
func deletedWritesSQL(commitTS bool) string {
	tAt := "(t.rec->>'at')::timestamptz"
	aEnd := "COALESCE((a.rec->>'finished_at')::timestamptz, (a.rec->>'started_at')::timestamptz)"
	bEnd := "COALESCE((b.rec->>'finished_at')::timestamptz, (b.rec->>'submitted_at')::timestamptz)"
	if commitTS {
		tAt = "COALESCE(pg_xact_commit_timestamp(t.wrote), " + tAt + ")"
		aEnd = "COALESCE(pg_xact_commit_timestamp(COALESCE((a.rec->>'marked_xid')::xid8::xid, a.wrote)), " + aEnd + ")"
		bEnd = "COALESCE(pg_xact_commit_timestamp(b.wrote), " + bEnd + ")"
	}
	return `
		UNION ALL
		SELECT 'transition ' || (t.rec->>'from_state') || '->' || (t.rec->>'to_state'), d.rec->>'service_id', d.rec->>'batch_id',
		       (t.rec->>'instance_id')::uuid, (t.rec->>'epoch')::bigint, ` + tAt + `, ` + tAt + `
		FROM history_audit.deleted_history t JOIN history_audit.deleted_batches d ON d.seq = t.seq
		WHERE t.tbl = 'batch_transitions' AND t.rec->>'instance_id' IS NOT NULL AND t.rec->>'epoch' IS NOT NULL
		UNION ALL
		SELECT 'attempt ' || (a.rec->>'reason'), a.rec->>'service_id', a.rec->>'batch_id', (a.rec->>'instance_id')::uuid,
		       (a.rec->>'epoch')::bigint, (a.rec->>'started_at')::timestamptz, ` + aEnd + `
		FROM history_audit.deleted_history a WHERE a.tbl = 'submission_attempts'
		UNION ALL
		SELECT 'attempt ' || (b.rec->>'attempt_reason'), b.rec->>'service_id', b.rec->>'batch_id', (b.rec->>'claimant')::uuid,
		       (b.rec->>'claim_epoch')::bigint, (b.rec->>'submitted_at')::timestamptz, ` + bEnd + `
		FROM history_audit.deleted_batches b
		WHERE b.rec->>'state' IN ('INFLIGHT', 'COMMITTED') AND b.rec->>'attempt_from' IS NOT NULL AND b.rec->>'claimant' IS NOT NULL
		  AND NOT EXISTS (SELECT 1 FROM history_audit.deleted_history x WHERE x.tbl = 'submission_attempts' AND x.seq = b.seq
		                  AND (x.rec->>'started_at')::timestamptz = (b.rec->>'submitted_at')::timestamptz)`
}
