-- The data path as it runs now: a job costs no write of its claim row, changes between
-- unfinished states can be HOT updates, and an enqueue wakes the instance that holds the
-- service_id.

-- unfinished: whether the batch has yet to reach a terminal state (COMMITTED or INVALID),
-- computed by Postgres from state. The indexes over batches name it in their predicates
-- instead of state, so that a change between unfinished states (NEW -> INFLIGHT -> PENDING ...)
-- changes no indexed value and can be a heap-only (HOT) update, which writes no index entry.
-- The fill factor leaves room on each page for those updates. Adding the column rewrites the
-- table once.
ALTER TABLE batches ADD COLUMN unfinished boolean NOT NULL
    GENERATED ALWAYS AS (state NOT IN ('COMMITTED', 'INVALID')) STORED;
ALTER TABLE batches SET (fillfactor = 80);
DROP INDEX batches_open_idx;
CREATE INDEX batches_open_idx ON batches (service_id, seq) WHERE unfinished;

-- Ledger batches are looked up by id through batches_ledger_batch_id_key; an index on every
-- batch's id costs an entry on every insert and every non-HOT update and serves nothing else.
DROP INDEX batches_batch_id_idx;

-- finished_at: when the statement that finished the batch ran. Retention deletes by it; the
-- last change of updated_at would do as well, but an index on updated_at would make every
-- update of a batch a non-HOT one.
ALTER TABLE batches ADD COLUMN finished_at timestamptz;
UPDATE batches SET finished_at = updated_at WHERE NOT unfinished;
DROP INDEX batches_finished_idx;
CREATE INDEX batches_finished_idx ON batches (finished_at, seq) WHERE finished_at IS NOT NULL;

-- The statements of the data path set finished_at themselves. Rows written another way (an
-- operator's UPDATE, an embedder's INSERT of a finished batch) get it from this trigger: set
-- (to updated_at, or now() when the update left updated_at alone) when a row is terminal
-- without it, cleared when a row leaves a terminal state. Its condition is false for the data
-- path's own writes, so its function never runs for them.
CREATE FUNCTION batchclaim_finished_at() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.state IN ('COMMITTED', 'INVALID') THEN
        IF TG_OP = 'UPDATE' AND NEW.updated_at IS NOT DISTINCT FROM OLD.updated_at THEN
            NEW.finished_at := now();
        ELSE
            NEW.finished_at := COALESCE(NEW.updated_at, now());
        END IF;
    ELSE
        NEW.finished_at := NULL;
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER batches_finished_at BEFORE INSERT OR UPDATE ON batches FOR EACH ROW
    WHEN ((NEW.state IN ('COMMITTED', 'INVALID')) <> (NEW.finished_at IS NOT NULL))
    EXECUTE FUNCTION batchclaim_finished_at();

-- unknown_since: when the batch last became UNKNOWN (an unknown POST outcome, an answer of the
-- ledger, or the adoption of a batch left in flight by a previous owner). The resubmission
-- grace runs from it: a batch adopted long after its POST is asked about before it is sent
-- again. Further UNKNOWN answers do not move it.
ALTER TABLE batches ADD COLUMN unknown_since timestamptz;
UPDATE batches SET unknown_since = COALESCE(submitted_at, created_at) WHERE state = 'UNKNOWN';

-- An attempt row is written by the in-flight mark and completed by the outcome: room on its
-- page makes the completion a HOT update. It now also carries the two state changes it makes
-- (from_state to INFLIGHT when marked, INFLIGHT to to_state when its outcome is recorded),
-- which used to be two more rows of batch_transitions per POST: batch_transitions keeps the
-- changes no POST makes (a ledger's answer to a poll, an adoption). batch_history shows both
-- as one list. Attempts written before this migration have no from_state; their changes are in
-- batch_transitions already.
ALTER TABLE submission_attempts SET (fillfactor = 70);
ALTER TABLE submission_attempts ADD COLUMN from_state text, ADD COLUMN to_state text;
CREATE VIEW batch_history AS
SELECT t.seq, t.from_state, t.to_state, t.instance_id, t.epoch, t.at, t.detail
FROM batch_transitions t
UNION ALL
SELECT a.seq, a.from_state, 'INFLIGHT', a.instance_id, a.epoch, a.started_at, a.reason
FROM submission_attempts a WHERE a.from_state IS NOT NULL
UNION ALL
SELECT a.seq, 'INFLIGHT', a.to_state, a.instance_id, a.epoch, a.finished_at, a.outcome
FROM submission_attempts a WHERE a.from_state IS NOT NULL AND a.to_state IS NOT NULL;

-- A claim is busy (kept for its owner past expiry_1, until expiry_2) while the owner has a POST
-- in flight: its service_id's head batch (the oldest unfinished one, VALID ones aside) is
-- INFLIGHT under the claim's owner and epoch. This is read from the batch itself, so the data
-- path writes no claim row per job. submitting_since stays for users of the claim engine alone
-- (Engine.BeginSubmission): busy is either.
CREATE FUNCTION batchclaim_head_in_flight(service_id text, claimant uuid, epoch bigint) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT EXISTS (
        SELECT 1 FROM (
            SELECT b.state, b.claimant, b.claim_epoch FROM batches b
            WHERE b.service_id = $1 AND b.unfinished AND b.state <> 'VALID'
            ORDER BY b.seq LIMIT 1
        ) h
        WHERE h.state = 'INFLIGHT' AND h.claimant = $2 AND h.claim_epoch = $3
    )
$$;

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
        WHEN now() < i.expiry_2 AND w.busy THEN 'held_busy'
        ELSE 'expired'
    END AS phase,
    w.busy
FROM service_id_claims c
LEFT JOIN instances i ON i.id = c.claimant
CROSS JOIN LATERAL (
    SELECT c.claimant IS NOT NULL
           AND (c.submitting_since IS NOT NULL OR batchclaim_head_in_flight(c.service_id, c.claimant, c.epoch)) AS busy
) w;

-- Wake-up on work. A statement that stores batches (the ingest API, ingest.Enqueue, the CLI or
-- an embedder's own INSERT) notifies, once per service_id and only when its transaction
-- commits, the instance holding the service_id on the channel batchclaim_work_<instance id
-- without dashes>, with the service_id as payload; a service_id nobody holds yet wakes every
-- instance's claim cycle on batchclaim_free. Resuming a halted service_id does the same.
-- Instances listen on a connection of their own and poll as well, so a notification lost
-- while that connection was down delays work, never loses it.
CREATE FUNCTION batchclaim_notify_work() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify(CASE WHEN c.claimant IS NULL THEN 'batchclaim_free'
                           ELSE 'batchclaim_work_' || replace(c.claimant::text, '-', '') END,
                      CASE WHEN c.claimant IS NULL THEN '' ELSE c.service_id END)
    FROM (SELECT DISTINCT t.service_id FROM changed t) k
    JOIN service_id_claims c ON c.service_id = k.service_id;
    RETURN NULL;
END
$$;
CREATE TRIGGER batches_notify_work AFTER INSERT ON batches
    REFERENCING NEW TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION batchclaim_notify_work();
CREATE TRIGGER service_halts_notify_work AFTER DELETE ON service_halts
    REFERENCING OLD TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION batchclaim_notify_work();
