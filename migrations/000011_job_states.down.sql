DROP FUNCTION IF EXISTS batchclaim_wake(text);
-- Batches in the new states cannot stay: a cancelled or discarded job is taken as INVALID.
UPDATE batches SET state = 'INVALID' WHERE state IN ('DISCARDED', 'CANCELLED');
DROP TRIGGER IF EXISTS batches_finished_at ON batches;
CREATE OR REPLACE FUNCTION batchclaim_finished_at() RETURNS trigger LANGUAGE plpgsql AS $$
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
ALTER TABLE batches
    DROP COLUMN max_attempts,
    DROP COLUMN unfinished,
    ADD COLUMN unfinished boolean NOT NULL GENERATED ALWAYS AS (state NOT IN ('COMMITTED', 'INVALID')) STORED,
    DROP CONSTRAINT batches_state_check,
    ADD CONSTRAINT batches_state_check
        CHECK (state IN ('NEW', 'INFLIGHT', 'PENDING', 'DELAYED', 'UNKNOWN', 'VALID', 'COMMITTED', 'INVALID'));
CREATE INDEX batches_open_idx ON batches (service_id, seq) WHERE unfinished;
