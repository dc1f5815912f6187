-- Back to the rules of migration 20. unfinished is generated from state again, which Postgres
-- can only do by adding the column anew: that rewrites the table once and builds the index over
-- unfinished batches again.
DROP TRIGGER batches_finished_at ON batches;
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
CREATE TRIGGER batches_finished_at BEFORE INSERT OR UPDATE ON batches FOR EACH ROW
    WHEN ((NEW.state IN ('COMMITTED', 'INVALID', 'DISCARDED', 'CANCELLED')) <> (NEW.finished_at IS NOT NULL))
    EXECUTE FUNCTION batchclaim_finished_at();
ALTER TABLE batches
    DROP COLUMN unfinished,
    ADD COLUMN unfinished boolean NOT NULL
        GENERATED ALWAYS AS (state NOT IN ('COMMITTED', 'INVALID', 'DISCARDED', 'CANCELLED')) STORED,
    DROP CONSTRAINT batches_state_check,
    ADD CONSTRAINT batches_state_check
        CHECK (state IN ('NEW', 'INFLIGHT', 'PENDING', 'DELAYED', 'UNKNOWN', 'VALID', 'COMMITTED', 'INVALID', 'DISCARDED', 'CANCELLED')),
    DROP CONSTRAINT batches_dlt_status_check,
    ADD CONSTRAINT batches_dlt_status_check
        CHECK (dlt_status IS NULL OR dlt_status IN ('PENDING', 'INVALID', 'VALID', 'COMMITTED', 'UNKNOWN'));
CREATE INDEX batches_open_idx ON batches (service_id, pos) WHERE unfinished;
