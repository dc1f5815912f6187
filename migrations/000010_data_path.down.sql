DROP TRIGGER IF EXISTS service_halts_notify_work ON service_halts;
DROP TRIGGER IF EXISTS batches_notify_work ON batches;
DROP FUNCTION IF EXISTS batchclaim_notify_work();
DROP TRIGGER IF EXISTS batches_finished_at ON batches;
DROP FUNCTION IF EXISTS batchclaim_finished_at();

DROP VIEW service_id_claims_effective;
CREATE VIEW service_id_claims_effective AS
SELECT
    c.service_id,
    c.claimant,
    i.name         AS claimant_name,
    c.epoch,
    c.claimed_at,
    i.heartbeat_at AS renewed_at,
    i.expiry_1,
    i.expiry_2,
    c.submitting_since,
    CASE
        WHEN c.claimant IS NULL THEN 'free'
        WHEN now() < i.expiry_1 THEN 'held'
        WHEN now() < i.expiry_2 AND c.submitting_since IS NOT NULL THEN 'held_busy'
        ELSE 'expired'
    END AS phase
FROM service_id_claims c
LEFT JOIN instances i ON i.id = c.claimant;

DROP FUNCTION IF EXISTS batchclaim_head_in_flight(text, uuid, bigint);
DROP VIEW IF EXISTS batch_history;
ALTER TABLE submission_attempts DROP COLUMN IF EXISTS to_state, DROP COLUMN IF EXISTS from_state;
ALTER TABLE submission_attempts RESET (fillfactor);
ALTER TABLE batches DROP COLUMN IF EXISTS unknown_since;

DROP INDEX IF EXISTS batches_finished_idx;
CREATE INDEX batches_finished_idx ON batches (updated_at, seq) WHERE state IN ('COMMITTED', 'INVALID');
DROP INDEX IF EXISTS batches_open_idx;
CREATE INDEX batches_open_idx ON batches (service_id, seq) WHERE state NOT IN ('COMMITTED', 'INVALID');
CREATE INDEX IF NOT EXISTS batches_batch_id_idx ON batches (batch_id);
ALTER TABLE batches RESET (fillfactor);
ALTER TABLE batches DROP COLUMN IF EXISTS finished_at;
ALTER TABLE batches DROP COLUMN IF EXISTS unfinished;
