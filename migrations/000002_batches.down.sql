DROP TABLE IF EXISTS batch_transitions;
DROP TABLE IF EXISTS submission_attempts;
DROP TABLE IF EXISTS service_halts;
DROP TABLE IF EXISTS batches;
