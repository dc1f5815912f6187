-- Back to migration 20's condition. Rows stored without an id stay; later inserts without
-- one are registered (and a second one of a service_id skipped as its duplicate), as before.
DROP TRIGGER batches_key ON batches;
CREATE TRIGGER batches_key BEFORE INSERT ON batches
    FOR EACH ROW
    WHEN (NEW.seq > COALESCE(NULLIF(current_setting('batchclaim_ingest.keyed_through', true), '')::bigint, 0))
    EXECUTE FUNCTION batchclaim_batch_key();
