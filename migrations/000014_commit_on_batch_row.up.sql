-- An attempt whose outcome commits its batch (a job that succeeded: verdict Done) writes no
-- row of submission_attempts: COMMITTED is final, so the batch row keeps that attempt for good
-- (claimant, claim_epoch, submitted_at, attempt_reason, attempt_from and attempt_xid from its
-- mark, finished_at from its outcome), with its outcome's HTTP status and duration in the two
-- columns added here. A successful job then costs two row writes, both of its batch row. Every
-- other outcome (a ledger's acceptance, a failure, an unknown outcome) and a lost POST still
-- write their row, so the log holds every attempt a batch had before its last, and the batch
-- row the last one until its row is written.
ALTER TABLE batches ADD COLUMN attempt_http_status integer, ADD COLUMN attempt_latency_ms double precision;

-- batch_row_attempts: the attempt a batch row carries, while no row of submission_attempts
-- holds it (none has its started_at), in the log's columns. A batch in flight carries its mark
-- (the row is written with the outcome, or by the adoption that finds it lost); a committed
-- batch carries its last attempt for good, outcome 'done'. Every reader of "a batch's
-- attempts" (batch_history, the status page, the adoption of a lost POST, the history check)
-- reads the log and this view, so the rule is written here alone.
CREATE VIEW batch_row_attempts AS
SELECT b.seq, b.service_id, b.batch_id, b.claimant AS instance_id, b.claim_epoch AS epoch,
       b.attempt_reason AS reason, b.attempt_from AS from_state,
       CASE WHEN b.state = 'COMMITTED' THEN 'COMMITTED' END AS to_state,
       b.submitted_at AS started_at,
       CASE WHEN b.state = 'COMMITTED' THEN b.finished_at END AS finished_at,
       b.attempt_http_status AS http_status, b.attempt_latency_ms AS latency_ms,
       CASE WHEN b.state = 'COMMITTED' THEN 'done' END AS outcome,
       b.attempt_xid AS marked_xid, b.attempts AS attempt, b.state AS batch_state
FROM batches b
WHERE b.state IN ('INFLIGHT', 'COMMITTED') AND b.attempt_from IS NOT NULL AND b.claimant IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM submission_attempts a WHERE a.seq = b.seq AND a.started_at = b.submitted_at);

-- batch_history: a batch's attempts carried by its row show as the log's rows do, a mark and
-- (once committed) an outcome.
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
SELECT r.seq, r.from_state, 'INFLIGHT', r.instance_id, r.epoch, r.started_at, r.reason
FROM batch_row_attempts r
UNION ALL
SELECT r.seq, 'INFLIGHT', r.to_state, r.instance_id, r.epoch, r.finished_at, r.outcome
FROM batch_row_attempts r WHERE r.to_state IS NOT NULL;
