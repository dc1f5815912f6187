-- A job may be stored without an id: an empty batch_id means none. Such a job is never
-- deduplicated, so its pair is not registered in batch_keys, which a job's id is for: the
-- trigger batches_key now leaves a row with an empty batch_id alone. A ledger batch always
-- has its id (its header signature), and one stored with an empty id is registered as
-- before, so that a second is refused. The previous release refuses an empty id before it
-- reaches the database, so none of its inserts meets the new condition's first part.
-- rolling-upgrade: created again at once in the same transaction, with a condition that every statement of the previous release meets as it met the one before
DROP TRIGGER batches_key ON batches;
CREATE TRIGGER batches_key BEFORE INSERT ON batches
    FOR EACH ROW
    WHEN ((NEW.batch_id <> '' OR NEW.ledger)
          AND NEW.seq > COALESCE(NULLIF(current_setting('batchclaim_ingest.keyed_through', true), '')::bigint, 0))
    EXECUTE FUNCTION batchclaim_batch_key();
