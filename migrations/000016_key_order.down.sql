DO $do$
BEGIN
    EXECUTE format($f$
CREATE OR REPLACE FUNCTION batchclaim_head_in_flight(service_id text, claimant uuid, epoch bigint) RETURNS boolean
LANGUAGE sql STABLE AS $b$
    SELECT EXISTS (
        SELECT 1 FROM (
            SELECT b.state, b.claimant, b.claim_epoch FROM %I.batches b
            WHERE b.service_id = $1 AND b.unfinished AND b.state <> 'VALID'
            ORDER BY b.seq LIMIT 1
        ) h
        WHERE h.state = 'INFLIGHT' AND h.claimant = $2 AND h.claim_epoch = $3
    )
$b$$f$, current_schema());
END
$do$;
DROP INDEX batches_open_idx;
CREATE INDEX batches_open_idx ON batches (service_id, seq) WHERE unfinished;
ALTER TABLE batches DROP COLUMN attempt_base, DROP COLUMN pos;
