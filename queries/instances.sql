-- Time is the database's: now(), or the optional now a test passes to move the database's
-- view of time. Durations arrive as milliseconds.

-- name: InstanceRegister :one
-- nonce is random per process: only the process that registered the row can renew it or
-- pass a fence with it, even if another process is given the same id.
INSERT INTO batchclaim.instances (id, nonce, name, host, version, started_at, heartbeat_at, expiry_1, expiry_2)
VALUES ( sqlc.arg(id)::uuid, sqlc.arg(nonce)::uuid, sqlc.arg(name)::text, sqlc.arg(host)::text, sqlc.arg(version)::text, COALESCE(sqlc.narg(now)::timestamptz, now()), COALESCE(sqlc.narg(now)::timestamptz, now()),
       COALESCE(sqlc.narg(now)::timestamptz, now()) + sqlc.arg(expiry_1_ms)::bigint * interval '1 millisecond',
       COALESCE(sqlc.narg(now)::timestamptz, now()) + sqlc.arg(expiry_2_ms)::bigint * interval '1 millisecond')
RETURNING heartbeat_at, expiry_1, expiry_2;

-- name: InstanceHeartbeat :one
-- Renews the lease that keeps all of the instance's claims alive: one row, whatever the
-- number of claims.
UPDATE batchclaim.instances i
SET heartbeat_at = COALESCE(sqlc.narg(now)::timestamptz, now()),
    expiry_1 = COALESCE(sqlc.narg(now)::timestamptz, now()) + sqlc.arg(expiry_1_ms)::bigint * interval '1 millisecond',
    expiry_2 = COALESCE(sqlc.narg(now)::timestamptz, now()) + sqlc.arg(expiry_2_ms)::bigint * interval '1 millisecond'
WHERE i.id = sqlc.arg(id) AND i.nonce = sqlc.arg(nonce)::uuid
RETURNING i.heartbeat_at, i.expiry_1, i.expiry_2;

-- name: InstanceLockForRegister :one
-- An existing row with the id a process is about to register, locked until the
-- registration commits: live while its lease has not passed expiry_2 by the database clock
-- (a paused owner may still be mid-submission until then).
SELECT nonce, expiry_2, (expiry_2 > COALESCE(sqlc.narg(now)::timestamptz, now()))::bool AS live
FROM batchclaim.instances WHERE id = sqlc.arg(id)
FOR UPDATE;

-- name: InstanceDeregister :execrows
DELETE FROM batchclaim.instances WHERE id = sqlc.arg(id) AND nonce = sqlc.arg(nonce)::uuid;

-- name: InstanceDeleteDead :execrows
-- Removes the row of a dead process whose id a new process registers (see
-- InstanceLockForRegister); its claims were voided first.
DELETE FROM batchclaim.instances WHERE id = sqlc.arg(id) AND nonce = sqlc.arg(nonce)::uuid;

-- name: InstancesPrune :execrows
-- Forgets instances dead for long that hold nothing any more.
DELETE FROM batchclaim.instances i
WHERE i.expiry_2 < COALESCE(sqlc.narg(now)::timestamptz, now()) - sqlc.arg(older_than_ms)::bigint * interval '1 millisecond'
  AND NOT EXISTS (SELECT 1 FROM batchclaim.service_id_claims c WHERE c.claimant = i.id);

-- name: InstancesStatus :many
SELECT i.id, i.name, i.host, i.version, i.started_at, i.heartbeat_at, i.expiry_1, i.expiry_2,
       EXTRACT(EPOCH FROM now() - i.heartbeat_at)::float8 AS heartbeat_age_seconds,
       (SELECT count(*) FROM batchclaim.service_id_claims c WHERE c.claimant = i.id)::bigint AS claims
FROM batchclaim.instances i
ORDER BY i.name, i.id;
