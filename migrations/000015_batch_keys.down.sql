DROP TRIGGER batches_truncate_keys ON batches;
DROP TRIGGER batches_drop_keys ON batches;
DROP TRIGGER batches_key ON batches;
DROP FUNCTION batchclaim_drop_batch_keys();
DROP FUNCTION batchclaim_batch_key();
DROP TABLE ledger_batch_keys;
DROP TABLE batch_keys;
ALTER TABLE batches ADD CONSTRAINT batches_service_id_batch_id_key UNIQUE (service_id, batch_id);
