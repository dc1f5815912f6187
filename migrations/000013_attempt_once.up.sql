-- A POST's row in submission_attempts is written once, by the statement that records its
-- outcome, instead of being inserted by the in-flight mark and completed by the outcome: one
-- row write less per job. While the POST is in flight, its attempt lives on the batch row:
-- claimant, claim_epoch and submitted_at were there already; attempt_reason and attempt_from
-- keep why it was made and the state the mark left, attempt_xid the mark's transaction. When a
-- batch is adopted from an owner that never recorded the outcome (it died, hung or lost its
-- claim), the adoption writes the row of that lost attempt from the same columns, with
-- marked_xid: the lost mark's transaction, so that a history check can still time the mark by
-- its commit. Rows written by the previous release's marks have no marked_xid and are never
-- written twice: the adoption skips a batch whose attempt row exists already.
ALTER TABLE batches ADD COLUMN attempt_reason text, ADD COLUMN attempt_from text, ADD COLUMN attempt_xid xid8;
ALTER TABLE submission_attempts ADD COLUMN marked_xid xid8;

-- batch_history shows the mark of a POST in flight from its batch row until the attempt's row
-- is written.
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
