DROP TRIGGER batches_key ON batches;
CREATE TRIGGER batches_key BEFORE INSERT ON batches
    FOR EACH ROW EXECUTE FUNCTION batchclaim_batch_key();
DROP FUNCTION batchclaim_keys_registered_through(bigint);
DROP FUNCTION batchclaim_register_keys(text[], text[], bigint[]);
