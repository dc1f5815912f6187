-- The previous schema expects a row for every attempt that ended: the attempts that committed
-- their batch get theirs, from their batch rows.
INSERT INTO submission_attempts (seq, service_id, batch_id, instance_id, epoch, reason, from_state, started_at,
    finished_at, http_status, latency_ms, outcome, to_state, marked_xid)
SELECT b.seq, b.service_id, b.batch_id, b.claimant, b.claim_epoch, b.attempt_reason, b.attempt_from, b.submitted_at,
       b.finished_at, b.attempt_http_status, b.attempt_latency_ms, 'done', 'COMMITTED', b.attempt_xid
FROM batches b
WHERE b.state = 'COMMITTED' AND b.attempt_from IS NOT NULL AND b.claimant IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM submission_attempts a WHERE a.seq = b.seq AND a.started_at = b.submitted_at);

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

ALTER TABLE batches DROP COLUMN IF EXISTS attempt_latency_ms, DROP COLUMN IF EXISTS attempt_http_status;
