-- Fixes to fencing and ordering found by reading the code against a real Postgres.

-- A per-process nonce on the lease. An embedder may give two processes the same instance id
-- (a successor started while the old process is paused); the id alone would then let the old
-- process renew the successor's lease and pass every (claimant, epoch) fence with the
-- successor's claims. Renewal, BeginSubmission, Fence and the claim cycle also match the
-- nonce, so only the process that registered the row can use it.
ALTER TABLE instances ADD COLUMN nonce uuid;
UPDATE instances SET nonce = gen_random_uuid() WHERE nonce IS NULL;
ALTER TABLE instances ALTER COLUMN nonce SET NOT NULL;

-- A ledger batch id (the header signature) is global on a ledger: one batch never belongs to
-- two service_ids. Opaque job ids of other submitters stay unique per service_id only, so the
-- rule applies to rows stored as ledger batches. Rows stored before this migration count as
-- ledger batches when their id looks like one and no other service_id has it (duplicates stored
-- earlier are left as they were; `batchclaim status` still shows them).
ALTER TABLE batches ADD COLUMN ledger boolean NOT NULL DEFAULT false;
UPDATE batches b SET ledger = true
WHERE b.batch_id ~ '^[0-9a-f]{128}$'
  AND NOT EXISTS (SELECT 1 FROM batches o WHERE o.batch_id = b.batch_id AND o.seq <> b.seq);
CREATE UNIQUE INDEX batches_ledger_batch_id_key ON batches (batch_id) WHERE ledger;
