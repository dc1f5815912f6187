DROP TABLE IF EXISTS retention_state;
DROP INDEX IF EXISTS batches_finished_idx;
