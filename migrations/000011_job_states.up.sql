-- Job semantics for the job-runner use: two more terminal states, a per-job attempt limit and
-- a run-at time.
--
-- DISCARDED: the job ran out of attempts (or its Submitter gave up on it); CANCELLED: an
-- operator or the application cancelled it before it ran. Both are terminal like COMMITTED and
-- INVALID, free their service_id for its next batch, and can be retried (BatchRetry).
-- unfinished is generated from state, so it is generated again with the wider terminal list;
-- that rewrites the table once, under a lock that holds the data path's statements (not the
-- instances' leases, which live in instances) until it commits. max_attempts: the job's own
-- limit (NULL: the runner's). A run-at time is next_attempt_at on a NEW batch: the queuer does
-- not hand it out before then, by the database clock.
-- rolling-upgrade: the check admits every state the previous release writes, and unfinished is generated again at once under the same name and meaning (the previous release writes neither new state; it sees them as finished, which they are)
ALTER TABLE batches
    DROP CONSTRAINT batches_state_check,
    ADD CONSTRAINT batches_state_check
        CHECK (state IN ('NEW', 'INFLIGHT', 'PENDING', 'DELAYED', 'UNKNOWN', 'VALID', 'COMMITTED', 'INVALID', 'DISCARDED', 'CANCELLED')),
    DROP COLUMN unfinished,
    ADD COLUMN unfinished boolean NOT NULL
        GENERATED ALWAYS AS (state NOT IN ('COMMITTED', 'INVALID', 'DISCARDED', 'CANCELLED')) STORED,
    ADD COLUMN max_attempts integer;
-- The index over unfinished batches went with the column; the same definition again.
CREATE INDEX batches_open_idx ON batches (service_id, seq) WHERE unfinished;

-- finished_at for rows written another way than by the data path, with the wider terminal list.
CREATE OR REPLACE FUNCTION batchclaim_finished_at() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.state IN ('COMMITTED', 'INVALID', 'DISCARDED', 'CANCELLED') THEN
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
-- rolling-upgrade: created again at once in the same transaction, with the wider terminal list in its condition
DROP TRIGGER batches_finished_at ON batches;
CREATE TRIGGER batches_finished_at BEFORE INSERT OR UPDATE ON batches FOR EACH ROW
    WHEN ((NEW.state IN ('COMMITTED', 'INVALID', 'DISCARDED', 'CANCELLED')) <> (NEW.finished_at IS NOT NULL))
    EXECUTE FUNCTION batchclaim_finished_at();

-- Wakes the holder of a service_id (or every instance's claim cycle when nobody holds it) when a
-- batch of it becomes workable without an INSERT: a cancel that frees the service_id, a retry.
-- The same channels as batchclaim_notify_work.
CREATE FUNCTION batchclaim_wake(service_id text) RETURNS void LANGUAGE sql AS $$
    SELECT pg_notify(CASE WHEN c.claimant IS NULL THEN 'batchclaim_free'
                          ELSE 'batchclaim_work_' || replace(c.claimant::text, '-', '') END,
                     CASE WHEN c.claimant IS NULL THEN '' ELSE c.service_id END)
    FROM service_id_claims c WHERE c.service_id = $1
$$;
