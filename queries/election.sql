-- Primary per role (package election). Time is the database's: now(), or the optional now a
-- test passes to move the database's view of time. Durations arrive as milliseconds.

-- name: ElectionTermsEnsure :exec
-- Makes sure each role has a term row. Rows are never deleted, so epochs are never reused.
INSERT INTO batchclaim.election_terms (role)
SELECT unnest(sqlc.arg(roles)::text[])
ON CONFLICT (role) DO NOTHING;

-- name: ElectionMemberJoin :one
-- Starts (or restarts) this instance's lease. Terms still recorded in its name are from a
-- previous lease that it has already given up locally: they are resigned in the same
-- statement, so a restarted lease never revives an old term.
WITH cleared AS (
    UPDATE batchclaim.election_terms t
    SET instance_id = NULL
    WHERE t.instance_id = sqlc.arg(instance_id)::uuid
    RETURNING t.role, t.epoch, t.name, t.host
), logged AS (
    INSERT INTO batchclaim.election_events (role, epoch, instance_id, name, host, event)
    SELECT c.role, c.epoch, sqlc.arg(instance_id)::uuid, c.name, c.host, 'resigned' FROM cleared c
)
INSERT INTO batchclaim.election_members (instance_id, name, host, joined_at, renewed_at, expires_at)
VALUES (sqlc.arg(instance_id)::uuid, sqlc.arg(name)::text, sqlc.arg(host)::text,
        COALESCE(sqlc.narg(now)::timestamptz, now()), COALESCE(sqlc.narg(now)::timestamptz, now()),
        COALESCE(sqlc.narg(now)::timestamptz, now()) + sqlc.arg(timeout_ms)::bigint * interval '1 millisecond')
ON CONFLICT (instance_id) DO UPDATE
SET name = EXCLUDED.name, host = EXCLUDED.host, joined_at = EXCLUDED.joined_at,
    renewed_at = EXCLUDED.renewed_at, expires_at = EXCLUDED.expires_at
RETURNING renewed_at;

-- name: ElectionMemberRenew :many
-- The heartbeat: extends the lease only while it is still live (an expired or evicted lease
-- is never revived; the instance must join again), and returns the terms held under it. No
-- row at all means the lease is lost; one row with a NULL role means it holds no term.
WITH renewed AS (
    UPDATE batchclaim.election_members m
    SET renewed_at = COALESCE(sqlc.narg(now)::timestamptz, now()),
        expires_at = COALESCE(sqlc.narg(now)::timestamptz, now()) + sqlc.arg(timeout_ms)::bigint * interval '1 millisecond'
    WHERE m.instance_id = sqlc.arg(instance_id)::uuid
      AND m.expires_at > COALESCE(sqlc.narg(now)::timestamptz, now())
    RETURNING m.instance_id, m.renewed_at
)
SELECT r.renewed_at, t.role AS role, t.epoch AS epoch
FROM renewed r LEFT JOIN batchclaim.election_terms t ON t.instance_id = r.instance_id
ORDER BY t.role;

-- name: ElectionMembersEvict :execrows
-- Part of a takeover (REPEATABLE READ): marks the expired leases of the holders of the given
-- roles as evicted. Writing the holder's lease row makes a takeover conflict with a renewal
-- of that lease that raced with it, so that one of the two fails (SQLSTATE 40001) instead of
-- both succeeding.
UPDATE batchclaim.election_members m
SET expires_at = '-infinity'
WHERE m.instance_id <> sqlc.arg(instance_id)::uuid
  AND m.expires_at <= COALESCE(sqlc.narg(now)::timestamptz, now())
  AND m.expires_at > '-infinity'::timestamptz
  AND m.instance_id IN (SELECT t.instance_id FROM batchclaim.election_terms t WHERE t.role = ANY(sqlc.arg(roles)::text[]));

-- name: ElectionTermsAcquire :many
-- Part of a takeover (REPEATABLE READ): takes every given role that has no live primary,
-- with a new epoch, provided the caller's own lease is live. The seed's optimistic
-- concurrency: of two instances taking the same role at once, the second fails.
WITH won AS (
    UPDATE batchclaim.election_terms t
    SET epoch = t.epoch + 1, instance_id = me.instance_id, name = me.name, host = me.host,
        elected_at = COALESCE(sqlc.narg(now)::timestamptz, now())
    FROM batchclaim.election_members me
    WHERE me.instance_id = sqlc.arg(instance_id)::uuid
      AND me.expires_at > COALESCE(sqlc.narg(now)::timestamptz, now())
      AND t.role = ANY(sqlc.arg(roles)::text[])
      AND (t.instance_id IS NULL OR NOT EXISTS (
            SELECT 1 FROM batchclaim.election_members h
            WHERE h.instance_id = t.instance_id
              AND h.expires_at > COALESCE(sqlc.narg(now)::timestamptz, now())))
    RETURNING t.role, t.epoch, t.instance_id, t.name, t.host
)
INSERT INTO batchclaim.election_events (role, epoch, instance_id, name, host, event)
SELECT w.role, w.epoch, w.instance_id, w.name, w.host, 'elected' FROM won w
RETURNING role, epoch;

-- name: ElectionTermsResign :many
-- Gives terms up, each only if it still has the given epoch, so that others may be elected
-- at once instead of after the timeout.
WITH g AS (
    SELECT unnest(sqlc.arg(roles)::text[]) AS role, unnest(sqlc.arg(epochs)::bigint[]) AS epoch
), gone AS (
    UPDATE batchclaim.election_terms t
    SET instance_id = NULL
    FROM g
    WHERE t.role = g.role AND t.epoch = g.epoch AND t.instance_id = sqlc.arg(instance_id)::uuid
    RETURNING t.role, t.epoch, t.name, t.host
)
INSERT INTO batchclaim.election_events (role, epoch, instance_id, name, host, event)
SELECT g.role, g.epoch, sqlc.arg(instance_id)::uuid, g.name, g.host, 'resigned' FROM gone g
RETURNING role, epoch;

-- name: ElectionMemberLeave :execrows
-- Removes the lease of an instance that stopped and holds no term.
DELETE FROM batchclaim.election_members m
WHERE m.instance_id = sqlc.arg(instance_id)::uuid
  AND NOT EXISTS (SELECT 1 FROM batchclaim.election_terms t WHERE t.instance_id = m.instance_id);

-- name: ElectionTermsRead :many
-- The seed's GetPrimary for several roles: each role's term, whether its primary is live by
-- the database clock, and for how much longer (milliseconds; 0 when not live).
SELECT t.role, t.epoch, t.instance_id, t.name, t.host,
       COALESCE(m.expires_at > COALESCE(sqlc.narg(now)::timestamptz, now()), false)::boolean AS live,
       GREATEST(0, COALESCE(EXTRACT(EPOCH FROM (m.expires_at - COALESCE(sqlc.narg(now)::timestamptz, now()))) * 1000, 0))::bigint AS expires_in_ms
FROM batchclaim.election_terms t
LEFT JOIN batchclaim.election_members m ON m.instance_id = t.instance_id AND m.expires_at > '-infinity'::timestamptz
WHERE t.role = ANY(sqlc.arg(roles)::text[])
ORDER BY t.role;

-- name: ElectionTermFence :one
-- Makes the caller's transaction conditional on the term: the term row is locked FOR SHARE
-- until the transaction ends, so that no takeover (an UPDATE of this row) can commit before
-- it, and the holder's lease must be live now. No row means the term is over.
SELECT t.epoch
FROM batchclaim.election_terms t
WHERE t.role = sqlc.arg(role)::text
  AND t.instance_id = sqlc.arg(instance_id)::uuid
  AND t.epoch = sqlc.arg(epoch)::bigint
  AND EXISTS (SELECT 1 FROM batchclaim.election_members m
              WHERE m.instance_id = t.instance_id
                AND m.expires_at > COALESCE(sqlc.narg(now)::timestamptz, clock_timestamp()))
FOR SHARE OF t;

-- name: ElectionEventsList :many
-- The history of terms, for the demo's checks and for operators.
SELECT id, role, epoch, instance_id, name, host, event, at
FROM batchclaim.election_events
ORDER BY id;
