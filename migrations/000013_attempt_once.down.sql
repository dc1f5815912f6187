-- The previous schema expects a row for every POST from its mark on: the POSTs in flight now
-- get theirs, as lost attempts (a previous release's outcome statement completes only rows
-- its own marks opened).
INSERT INTO submission_attempts (seq, service_id, batch_id, instance_id, epoch, reason, from_state, started_at)
SELECT b.seq, b.service_id, b.batch_id, b.claimant, b.claim_epoch, b.attempt_reason, b.attempt_from, b.submitted_at
FROM batches b
WHERE b.state = 'INFLIGHT' AND b.attempt_from IS NOT NULL AND b.claimant IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM submission_attempts a WHERE a.seq = b.seq AND a.started_at = b.submitted_at);

CREATE OR REPLACE VIEW batch_history AS
SELECT t.seq, t.from_state, t.to_state, t.instance_id, t.epoch, t.at, t.detail
FROM batch_transitions t
UNION ALL
SELECT a.seq, a.from_state, 'INFLIGHT', a.instance_id, a.epoch, a.started_at, a.reason
FROM submission_attempts a WHERE a.from_state IS NOT NULL
UNION ALL
SELECT a.seq, 'INFLIGHT', a.to_state, a.instance_id, a.epoch, a.finished_at, a.outcome
FROM submission_attempts a WHERE a.from_state IS NOT NULL AND a.to_state IS NOT NULL;

ALTER TABLE submission_attempts DROP COLUMN IF EXISTS marked_xid;
ALTER TABLE batches DROP COLUMN IF EXISTS attempt_xid, DROP COLUMN IF EXISTS attempt_from, DROP COLUMN IF EXISTS attempt_reason;
