DROP INDEX IF EXISTS batches_ledger_batch_id_key;
ALTER TABLE batches DROP COLUMN IF EXISTS ledger;
ALTER TABLE instances DROP COLUMN IF EXISTS nonce;
