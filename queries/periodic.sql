-- name: PeriodicRegister :exec
-- Registers a schedule, or updates its schedule text and service_id as configured (the row
-- is not written when they are as stored). next_tick is the schedule's first tick after now,
-- set when the row is new or its schedule changed.
INSERT INTO batchclaim.periodic_jobs (name, schedule, service_id, next_tick)
VALUES (sqlc.arg(name), sqlc.arg(schedule), sqlc.arg(service_id), sqlc.arg(next_tick)::timestamptz)
ON CONFLICT (name) DO UPDATE
SET schedule = EXCLUDED.schedule, service_id = EXCLUDED.service_id, next_tick = EXCLUDED.next_tick, updated_at = now()
WHERE periodic_jobs.schedule IS DISTINCT FROM EXCLUDED.schedule
   OR periodic_jobs.service_id IS DISTINCT FROM EXCLUDED.service_id;

-- name: PeriodicState :one
-- A schedule's last tick taken (NULL: none yet), when it was registered, and the database's
-- clock, which decides when a tick has come.
SELECT last_tick, registered_at, now()::timestamptz AS now FROM batchclaim.periodic_jobs WHERE name = sqlc.arg(name);

-- name: PeriodicAdvance :one
-- Takes the tick for the caller's transaction: advances last_tick to tick if it is before it
-- (or none) and the tick has come by the database clock. A concurrent caller waits for the
-- row lock and then finds the tick taken (no row), so of all instances one stores the tick's
-- job, in the same transaction; if that transaction rolls back (its instance died) the tick
-- is free again.
UPDATE batchclaim.periodic_jobs
SET last_tick = sqlc.arg(tick)::timestamptz, next_tick = sqlc.arg(next_tick)::timestamptz, updated_at = now()
WHERE name = sqlc.arg(name) AND (last_tick IS NULL OR last_tick < sqlc.arg(tick)::timestamptz) AND sqlc.arg(tick)::timestamptz <= now()
RETURNING name;

-- name: PeriodicStored :exec
-- Records the seq of the job stored for the tick just taken.
UPDATE batchclaim.periodic_jobs SET last_seq = sqlc.arg(seq)::bigint WHERE name = sqlc.arg(name);

-- name: PeriodicList :many
-- Every schedule, by name, with the state of its last tick's job (NULL once retention
-- deleted it).
SELECT p.name, p.schedule, p.service_id, p.last_tick, p.last_seq, p.next_tick, p.updated_at,
       b.state AS last_state
FROM batchclaim.periodic_jobs p
LEFT JOIN batchclaim.batches b ON b.seq = p.last_seq
ORDER BY p.name;

-- name: PeriodicDelete :one
DELETE FROM batchclaim.periodic_jobs WHERE name = sqlc.arg(name) RETURNING name;
