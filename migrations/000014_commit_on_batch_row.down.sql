-- The previous schema expects a row for every attempt that ended: the attempts that committed
-- their batch get theirs, from their batch rows.
INSERT INTO submission_attempts (seq, service_id, batch_id, instance_id, epoch, reason, from_state, started_at,
    finished_at, http_status, latency_ms, outcome, to_state, marked_xid)
SELECT r.seq, r.service_id, r.batch_id, r.instance_id, r.epoch, r.reason, r.from_state, r.started_at,
       r.finished_at, r.http_status, r.latency_ms, r.outcome, r.to_state, r.marked_xid
FROM batch_row_attempts r
WHERE r.to_state = 'COMMITTED';

CREATE OR REPLACE VIEW batch_history AS
SELECT t.seq, t.from_state, t.to_state, t.instance_id, t.epoch, t.at, t.detail
FROM batch_transitions t
UNION ALL
SELECT a.seq, a.from_state, 'INFLIGHT', a.instance_id, a.epoch, a.started_at, a.reason
FROM submission_attempts a WHERE a.from_state IS NOT NULL
UNION ALL
SELECT a.seq, 'INFLIGHT', a.to_state, a.instance_id, a.epoch, a.finished_at, a.outcome
FROM submission_attempts a WHERE a.from_state IS NOT NULL AND a.to_state IS NOT NULL
UNION ALL
SELECT b.seq, b.attempt_from, 'INFLIGHT', b.claimant, b.claim_epoch, b.submitted_at, b.attempt_reason
FROM batches b
WHERE b.unfinished AND b.state = 'INFLIGHT' AND b.attempt_from IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM submission_attempts a WHERE a.seq = b.seq AND a.started_at = b.submitted_at);

DROP VIEW batch_row_attempts;

ALTER TABLE batches DROP COLUMN IF EXISTS attempt_latency_ms, DROP COLUMN IF EXISTS attempt_http_status;
