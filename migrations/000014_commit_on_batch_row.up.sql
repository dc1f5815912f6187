-- An attempt whose outcome commits its batch (a job that succeeded: verdict Done) writes no
-- row of submission_attempts: COMMITTED is final, so the batch row keeps that attempt for good
-- (claimant, claim_epoch, submitted_at, attempt_reason, attempt_from and attempt_xid from its
-- mark, finished_at from its outcome), with its outcome's HTTP status and duration in the two
-- columns added here. A successful job then costs two row writes, both of its batch row. Every
-- other outcome (a ledger's acceptance, a failure, an unknown outcome) and a lost POST still
-- write their row, so the log holds every attempt a batch had before its last, and the batch
-- row the last one until its row is written.
ALTER TABLE batches ADD COLUMN attempt_http_status integer, ADD COLUMN attempt_latency_ms double precision;

-- batch_history shows a batch's last attempt from its batch row while no row of it exists: its
-- mark while it is in flight, its mark and its outcome once it committed its batch.
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
WHERE b.state IN ('INFLIGHT', 'COMMITTED') AND b.attempt_from IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM submission_attempts a WHERE a.seq = b.seq AND a.started_at = b.submitted_at)
UNION ALL
SELECT b.seq, 'INFLIGHT', 'COMMITTED', b.claimant, b.claim_epoch, b.finished_at, 'done'
FROM batches b
WHERE b.state = 'COMMITTED' AND b.attempt_from IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM submission_attempts a WHERE a.seq = b.seq AND a.started_at = b.submitted_at);
