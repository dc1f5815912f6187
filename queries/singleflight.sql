-- Per-key single-flight cache. Every expiry is judged by the database clock, now(); durations
-- come in as microseconds. Each statement is one row of singleflight_entries, so the row lock
-- orders a fetch's store against a takeover of its lease.

-- name: SingleflightLookup :one
-- The key's entry and fetch lease as the database sees them now: whether the value and the
-- negative result are fresh, whether a fetch holds a live lease, and how long it has left.
SELECT key, fetch_epoch, holder, value, value_epoch, fetched_at, expires_at,
       error, error_epoch,
       (expires_at IS NOT NULL AND expires_at > now())::bool AS fresh,
       (error_until IS NOT NULL AND error_until > now())::bool AS error_fresh,
       (holder IS NOT NULL AND lease_expiry > now())::bool AS fetching,
       COALESCE(floor(extract(epoch FROM lease_expiry - now()) * 1000000), 0)::bigint AS lease_left_us
FROM batchclaim.singleflight_entries
WHERE key = sqlc.arg(key);

-- name: SingleflightAcquire :one
-- Begins a fetch: takes the key's lease with a new epoch and fixes the expiry its result will
-- get, but only if the key has no fresh value, no fresh negative result and no live lease.
-- No row returned means someone else fetches (or just did). taken_over_from names the holder
-- whose expired lease this replaced.
INSERT INTO batchclaim.singleflight_entries AS e (key, fetch_epoch, holder, lease_expiry, fetch_started_at, pending_expiry)
VALUES (sqlc.arg(key), nextval('batchclaim.singleflight_epoch_seq'), sqlc.arg(holder)::text,
        now() + sqlc.arg(lease_us)::bigint * interval '1 microsecond', now(),
        now() + sqlc.arg(ttl_us)::bigint * interval '1 microsecond')
ON CONFLICT (key) DO UPDATE
SET fetch_epoch = nextval('batchclaim.singleflight_epoch_seq'),
    holder = EXCLUDED.holder,
    lease_expiry = EXCLUDED.lease_expiry,
    fetch_started_at = EXCLUDED.fetch_started_at,
    pending_expiry = EXCLUDED.pending_expiry,
    taken_over_from = e.holder
WHERE (e.expires_at IS NULL OR e.expires_at <= now())
  AND (e.error_until IS NULL OR e.error_until <= now())
  AND (e.holder IS NULL OR e.lease_expiry <= now())
RETURNING fetch_epoch, pending_expiry, taken_over_from;

-- name: SingleflightRenew :execrows
-- Extends the lease of a running fetch. Zero rows: the lease was taken over.
UPDATE batchclaim.singleflight_entries
SET lease_expiry = now() + sqlc.arg(lease_us)::bigint * interval '1 microsecond'
WHERE key = sqlc.arg(key) AND fetch_epoch = sqlc.arg(epoch) AND holder = sqlc.arg(holder)::text;

-- name: SingleflightStore :one
-- Stores a fetch's value, only while its epoch is still the key's current fetch and its
-- lease is still in its holder's name, frees the lease, and wakes the waiters when it commits.
-- No row returned: the lease was taken over and the result is dropped.
WITH stored AS (
    UPDATE batchclaim.singleflight_entries
    SET value = sqlc.arg(value)::bytea, value_epoch = fetch_epoch, fetched_at = now(),
        expires_at = pending_expiry, error = NULL, error_epoch = NULL, error_until = NULL,
        holder = NULL, lease_expiry = NULL
    WHERE key = sqlc.arg(key) AND fetch_epoch = sqlc.arg(epoch) AND holder = sqlc.arg(holder)::text
      AND (value_epoch IS NULL OR value_epoch < sqlc.arg(epoch))
    RETURNING key, value_epoch, fetched_at, expires_at
)
SELECT s.value_epoch, s.fetched_at, s.expires_at,
       pg_notify('batchclaim_singleflight', s.key)::text AS notified
FROM stored s;

-- name: SingleflightStoreError :one
-- Stores a fetch's error as a negative result until now() + error_ttl, under the same
-- conditions as SingleflightStore. The value, if any, stays (stale readers may still use it).
WITH stored AS (
    UPDATE batchclaim.singleflight_entries
    SET error = sqlc.arg(error)::text, error_epoch = fetch_epoch,
        error_until = now() + sqlc.arg(error_ttl_us)::bigint * interval '1 microsecond',
        holder = NULL, lease_expiry = NULL
    WHERE key = sqlc.arg(key) AND fetch_epoch = sqlc.arg(epoch) AND holder = sqlc.arg(holder)::text
    RETURNING key, error_epoch
)
SELECT s.error_epoch, pg_notify('batchclaim_singleflight', s.key)::text AS notified
FROM stored s;

-- name: SingleflightRelease :execrows
-- Gives up a fetch without a result (the instance is stopping), so that a waiter takes over at
-- once instead of after the lease expires.
WITH released AS (
    UPDATE batchclaim.singleflight_entries
    SET holder = NULL, lease_expiry = NULL
    WHERE key = sqlc.arg(key) AND fetch_epoch = sqlc.arg(epoch) AND holder = sqlc.arg(holder)::text
    RETURNING key
)
SELECT pg_notify('batchclaim_singleflight', r.key)::text FROM released r;

-- name: SingleflightInvalidate :execrows
-- Makes the key's value stale now (it stays available to readers that accept stale values)
-- and forgets a negative result, so the next Get fetches. A fetch already running began
-- before the invalidation: its value will be stored already stale (its waiters still get it).
UPDATE batchclaim.singleflight_entries
SET expires_at = LEAST(expires_at, now()), pending_expiry = LEAST(pending_expiry, now()), error_until = NULL
WHERE key = sqlc.arg(key);
