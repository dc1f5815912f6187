-- The rule that unfinished and finished_at follow state, for a write that leaves them
-- otherwise, moves from a BEFORE UPDATE row trigger to an AFTER UPDATE one.
--
-- Postgres locks a row before it runs a BEFORE UPDATE row trigger on it, whatever the
-- trigger's condition: each update of a batch took a tuple lock, with its WAL record, ahead
-- of the update itself, two a job on the data path (its outcome and the next job's mark),
-- although those statements set both columns and the trigger never had anything to do. An
-- AFTER UPDATE row trigger's condition is judged without a lock. Its function runs only for a
-- write that left the columns disagreeing with state (an operator's or an application's own
-- UPDATE that names state alone, or a binary built for schema 20), and sets them by a second
-- update of the row at the end of that statement, to the values the BEFORE UPDATE trigger set.
-- An insert has no row to lock and keeps the BEFORE INSERT trigger and its function.
--
-- The function names the table through the trigger's own schema and table, whatever the
-- search_path of the statement that fires it.
CREATE FUNCTION batchclaim_finished_at_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.state = ANY ('{COMMITTED,INVALID,DISCARDED,CANCELLED}'::text[]) THEN
        EXECUTE format('UPDATE %I.%I SET unfinished = false, finished_at = $2 WHERE seq = $1', TG_TABLE_SCHEMA, TG_TABLE_NAME)
        USING NEW.seq, COALESCE(NEW.finished_at,
            CASE WHEN NEW.updated_at IS NOT DISTINCT FROM OLD.updated_at THEN now() ELSE COALESCE(NEW.updated_at, now()) END);
    ELSE
        EXECUTE format('UPDATE %I.%I SET unfinished = true, finished_at = NULL WHERE seq = $1', TG_TABLE_SCHEMA, TG_TABLE_NAME)
        USING NEW.seq;
    END IF;
    RETURN NULL;
END
$$;

-- rolling-upgrade: created again at once in the same transaction, for inserts alone; every update the previous release makes sets both columns itself, and the AFTER UPDATE trigger below sets them for any other
DROP TRIGGER batches_finished_at ON batches;
CREATE TRIGGER batches_finished_at BEFORE INSERT ON batches FOR EACH ROW
    WHEN ((NEW.state = ANY ('{COMMITTED,INVALID,DISCARDED,CANCELLED}'::text[])) <> (NEW.finished_at IS NOT NULL)
          OR NEW.unfinished IS DISTINCT FROM (NEW.finished_at IS NULL))
    EXECUTE FUNCTION batchclaim_finished_at();
CREATE TRIGGER batches_finished_at_update AFTER UPDATE ON batches FOR EACH ROW
    WHEN ((NEW.state = ANY ('{COMMITTED,INVALID,DISCARDED,CANCELLED}'::text[])) <> (NEW.finished_at IS NOT NULL)
          OR NEW.unfinished IS DISTINCT FROM (NEW.finished_at IS NULL))
    EXECUTE FUNCTION batchclaim_finished_at_update();
