-- Owner-token locks. Expiry is judged by the database clock: now(), or the optional now a
-- test passes to move the database's view of time. Durations arrive as milliseconds.

-- name: LockAcquire :one
-- Takes the lock if it is free or its holder let it expire, with a new token and epoch + 1.
-- No row means another holder's lock is still valid.
WITH clock AS (
    SELECT COALESCE(sqlc.narg(now)::timestamptz, now()) AS now
),
taken AS (
    INSERT INTO batchclaim.owner_locks AS l (name, token, epoch, acquired_at, expires_at)
    SELECT sqlc.arg(name)::text, sqlc.arg(token)::text, 1, clock.now,
           clock.now + sqlc.arg(ttl_ms)::bigint * interval '1 millisecond'
    FROM clock
    ON CONFLICT (name) DO UPDATE
    SET token = excluded.token, epoch = l.epoch + 1,
        acquired_at = excluded.acquired_at, expires_at = excluded.expires_at
    WHERE l.token IS NULL OR l.expires_at <= excluded.acquired_at
    RETURNING l.name, l.epoch, l.acquired_at, l.expires_at
),
logged AS (
    INSERT INTO batchclaim.owner_lock_events (name, epoch, event, expires_at)
    SELECT taken.name, taken.epoch, 'acquired', taken.expires_at FROM taken
)
SELECT taken.epoch, taken.acquired_at::timestamptz AS acquired_at, taken.expires_at::timestamptz AS expires_at FROM taken;

-- name: LockRenew :one
-- Extends the lock only for the holder of this token and epoch, and only while it has not
-- expired: an expired lock may already belong to somebody else's next acquisition.
UPDATE batchclaim.owner_locks
SET expires_at = COALESCE(sqlc.narg(now)::timestamptz, now()) + sqlc.arg(ttl_ms)::bigint * interval '1 millisecond'
WHERE name = sqlc.arg(name) AND token = sqlc.arg(token)::text AND epoch = sqlc.arg(epoch)
  AND expires_at > COALESCE(sqlc.narg(now)::timestamptz, now())
RETURNING expires_at::timestamptz AS expires_at;

-- name: LockRelease :one
-- Frees the lock only for the holder of this token and epoch. still_valid says whether the
-- lock had not yet expired when it was released.
WITH released AS (
    UPDATE batchclaim.owner_locks l
    SET token = NULL, expires_at = NULL
    FROM batchclaim.owner_locks old
    WHERE old.name = l.name AND l.name = sqlc.arg(name) AND l.token = sqlc.arg(token)::text AND l.epoch = sqlc.arg(epoch)
    RETURNING l.name, l.epoch, old.expires_at > COALESCE(sqlc.narg(now)::timestamptz, now()) AS still_valid
),
logged AS (
    INSERT INTO batchclaim.owner_lock_events (name, epoch, event)
    SELECT released.name, released.epoch, 'released' FROM released
)
SELECT released.epoch, released.still_valid::bool AS still_valid FROM released;

-- name: LockFence :one
-- Inside the caller's transaction: the lock is still held with this token and epoch and has
-- not expired. FOR SHARE keeps every acquisition (and release) out until the caller commits.
SELECT epoch, expires_at::timestamptz AS expires_at FROM batchclaim.owner_locks
WHERE name = sqlc.arg(name) AND token = sqlc.arg(token)::text AND epoch = sqlc.arg(epoch)
  AND expires_at > COALESCE(sqlc.narg(now)::timestamptz, now())
FOR SHARE;

-- name: LockGet :one
SELECT name, epoch, (token IS NOT NULL AND expires_at > COALESCE(sqlc.narg(now)::timestamptz, now()))::bool AS held,
       acquired_at, expires_at, COALESCE(sqlc.narg(now)::timestamptz, now())::timestamptz AS db_now
FROM batchclaim.owner_locks WHERE name = sqlc.arg(name);

-- name: LockAcquisitions :many
-- Every acquisition of a lock, with when (if ever) its holder released it and when the
-- next acquisition happened.
SELECT a.epoch, a.at AS acquired_at, a.expires_at AS first_expires_at,
       r.at AS released_at
FROM batchclaim.owner_lock_events a
LEFT JOIN batchclaim.owner_lock_events r ON r.name = a.name AND r.epoch = a.epoch AND r.event = 'released'
WHERE a.name = sqlc.arg(name) AND a.event = 'acquired'
ORDER BY a.epoch;
