-- Back to migration 20's condition. Rows stored without an id stay. A later single insert
-- without one registers its empty pair, and the next one of the service_id is skipped as its
-- duplicate (a newer binary's Enqueue fails on it, asking for the migration); a bulk
-- statement's rows register nothing either way.
DROP TRIGGER batches_key ON batches;
CREATE TRIGGER batches_key BEFORE INSERT ON batches
    FOR EACH ROW
    WHEN (NEW.seq > COALESCE(NULLIF(current_setting('batchclaim_ingest.keyed_through', true), '')::bigint, 0))
    EXECUTE FUNCTION batchclaim_batch_key();
