DROP TABLE IF EXISTS periodic_jobs;
ALTER TABLE batches DROP COLUMN IF EXISTS cancel_reason, DROP COLUMN IF EXISTS cancel_requested_at, DROP COLUMN IF EXISTS cancel_attempt;
