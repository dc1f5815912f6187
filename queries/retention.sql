-- Retention of finished batches. Time is the database's: now(), or the optional now a test
-- passes to move the database's view of time. Durations arrive as milliseconds.

-- name: RetentionTryLock :one
-- One instance prunes at a time: a transaction-scoped advisory lock, taken without waiting
-- and released by the chunk's commit or rollback (also when the instance dies).
SELECT pg_try_advisory_xact_lock(hashtextextended('batchclaim.retention', 0))::bool AS locked;

-- name: RetentionPrune :execrows
-- Deletes up to max_rows finished batches whose finish time (finished_at) is older than
-- max_age_ms, oldest first; their attempts and transitions go with them (ON DELETE CASCADE).
-- The INVALID batch that halted a service_id is kept while the halt stands. The chunk is
-- read in order from batches_finished_idx (NOT IN a hashed subplan keeps that order) and
-- deleted by primary key, so a chunk touches only its own rows however large the table.
DELETE FROM batchclaim.batches
WHERE seq = ANY(ARRAY(
    SELECT b.seq FROM batchclaim.batches b
    WHERE b.finished_at IS NOT NULL
      AND b.finished_at < COALESCE(sqlc.narg(now)::timestamptz, now()) - sqlc.arg(max_age_ms)::bigint * interval '1 millisecond'
      AND b.seq NOT IN (SELECT h.seq FROM batchclaim.service_halts h)
    ORDER BY b.finished_at, b.seq
    LIMIT sqlc.arg(max_rows)
))
-- Checked again on the row the DELETE finds: a row a Retry revived after this statement's
-- snapshot (or one that halts its service_id now) is left alone. Postgres re-evaluates these
-- conditions on the newest version of a row changed meanwhile; the ARRAY above it does not.
  AND finished_at IS NOT NULL
  AND finished_at < COALESCE(sqlc.narg(now)::timestamptz, now()) - sqlc.arg(max_age_ms)::bigint * interval '1 millisecond';

-- name: RetentionRecord :one
-- Records a chunk of the current run: run_pruned is the run's total so far, chunk_pruned
-- this chunk's.
INSERT INTO batchclaim.retention_state AS r (id, instance_id, max_age_ms, last_run_at, last_run_pruned, pruned_total)
VALUES (true, sqlc.arg(instance_id)::uuid, sqlc.arg(max_age_ms)::bigint, COALESCE(sqlc.narg(now)::timestamptz, now()),
        sqlc.arg(run_pruned)::bigint, sqlc.arg(chunk_pruned)::bigint)
ON CONFLICT (id) DO UPDATE
SET instance_id = EXCLUDED.instance_id, max_age_ms = EXCLUDED.max_age_ms, last_run_at = EXCLUDED.last_run_at,
    last_run_pruned = EXCLUDED.last_run_pruned, pruned_total = r.pruned_total + EXCLUDED.pruned_total
RETURNING r.last_run_at;

-- name: RetentionStatus :one
-- For `batchclaim status`: the last run, if any.
SELECT r.instance_id, COALESCE(i.name, '')::text AS instance_name, r.max_age_ms, r.last_run_at,
       EXTRACT(EPOCH FROM now() - r.last_run_at)::float8 AS last_run_age_seconds,
       r.last_run_pruned, r.pruned_total
FROM batchclaim.retention_state r
LEFT JOIN batchclaim.instances i ON i.id = r.instance_id;
