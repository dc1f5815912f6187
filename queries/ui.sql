-- The status page's reads. Each is bounded: open batches through the partial index over
-- unfinished batches, history through the last rows of the append-only logs (their primary
-- keys), never a scan of every batch ever stored.

-- name: UIOpenBatches :many
-- Unfinished batches per service_id and state, with the age of the oldest (database clock).
SELECT service_id, state, count(*)::bigint AS batches,
       EXTRACT(EPOCH FROM now() - min(created_at))::float8 AS oldest_seconds
FROM batches
WHERE unfinished
GROUP BY service_id, state
ORDER BY service_id, state;

-- name: UIServiceOwners :many
-- The instance holding each of the given service_ids (those held).
SELECT c.service_id, i.name
FROM service_id_claims c
JOIN instances i ON i.id = c.claimant
WHERE c.service_id = ANY(sqlc.arg(service_ids)::text[]);

-- name: UITransitionsRecent :many
-- The newest batch state changes, with who made them: the last rows of the transition log and
-- of the attempt log (a POST's mark and outcome), each read by its primary key.
WITH t AS (
    SELECT x.seq, x.at, x.from_state, x.to_state, x.epoch, x.instance_id
    FROM (SELECT * FROM batch_transitions ORDER BY id DESC LIMIT sqlc.arg(max_rows)::int) x
    UNION ALL
    SELECT a.seq, a.started_at, a.from_state, 'INFLIGHT', a.epoch, a.instance_id
    FROM (SELECT * FROM submission_attempts ORDER BY id DESC LIMIT sqlc.arg(max_rows)::int) a
    WHERE a.from_state IS NOT NULL
    UNION ALL
    SELECT a.seq, a.finished_at, 'INFLIGHT', a.to_state, a.epoch, a.instance_id
    FROM (SELECT * FROM submission_attempts ORDER BY id DESC LIMIT sqlc.arg(max_rows)::int) a
    WHERE a.from_state IS NOT NULL AND a.to_state IS NOT NULL
)
SELECT t.at::timestamptz AS at, t.from_state, t.to_state::text AS to_state, t.epoch, b.service_id, b.batch_id,
       t.instance_id, i.name AS instance_name
FROM t
JOIN batches b ON b.seq = t.seq
LEFT JOIN instances i ON i.id = t.instance_id
ORDER BY t.at DESC
LIMIT sqlc.arg(max_rows)::int;

-- name: UITransitionsPerBucket :many
-- State changes per target state in buckets of bucket_ms over the last window_ms, bucket 0
-- being the newest. Only the last scan rows of each log are read, so a very busy window is cut.
WITH t AS (
    SELECT x.at, x.to_state FROM batch_transitions x
    WHERE x.id > (SELECT COALESCE(max(id), 0) FROM batch_transitions) - sqlc.arg(scan)::bigint
    UNION ALL
    SELECT a.started_at, 'INFLIGHT' FROM submission_attempts a
    WHERE a.id > (SELECT COALESCE(max(id), 0) FROM submission_attempts) - sqlc.arg(scan)::bigint AND a.from_state IS NOT NULL
    UNION ALL
    SELECT a.finished_at, a.to_state FROM submission_attempts a
    WHERE a.id > (SELECT COALESCE(max(id), 0) FROM submission_attempts) - sqlc.arg(scan)::bigint
      AND a.from_state IS NOT NULL AND a.to_state IS NOT NULL
)
SELECT floor(EXTRACT(EPOCH FROM now() - t.at) * 1000 / sqlc.arg(bucket_ms)::bigint)::bigint AS bucket,
       t.to_state::text AS to_state, count(*)::bigint AS transitions
FROM t
WHERE t.at > now() - sqlc.arg(window_ms)::bigint * interval '1 millisecond'
GROUP BY 1, 2
ORDER BY 1, 2;

-- name: UITakeoversRecent :many
-- The newest claims voided from an instance whose lease ran out, with the instance that
-- acquired the service_id next (if one did yet). Only the last scan ownership events are read,
-- and the next owner is looked up for the listed ones only. Instances are named by the start
-- of their id once their row was pruned.
WITH v AS (
    SELECT e.id, e.service_id, e.instance_id, e.epoch, e.event, e.at
    FROM (SELECT * FROM claim_events ORDER BY id DESC LIMIT sqlc.arg(scan)::int) e
    WHERE e.event IN ('voided_idle', 'voided_expired')
    ORDER BY e.id DESC
    LIMIT sqlc.arg(max_rows)::int
)
SELECT v.id, v.service_id, v.epoch, v.event, v.at,
       COALESCE(fi.name, left(v.instance_id::text, 8))::text AS from_name,
       COALESCE(ti.name, left(a.instance_id::text, 8), '')::text AS to_name,
       COALESCE(EXTRACT(EPOCH FROM a.at - v.at), -1)::float8 AS acquired_after_seconds
FROM v
LEFT JOIN LATERAL (
    SELECT x.instance_id, x.at FROM claim_events x
    WHERE x.service_id = v.service_id AND x.id > v.id AND x.event = 'acquired' AND x.epoch > v.epoch
    ORDER BY x.id LIMIT 1
) a ON true
LEFT JOIN instances fi ON fi.id = v.instance_id
LEFT JOIN instances ti ON ti.id = a.instance_id
ORDER BY v.id DESC;

-- name: ServiceHaltDelete :one
-- Resumes a halted service_id: the queuer sends its batches again from its next cycle.
DELETE FROM service_halts WHERE service_id = sqlc.arg(service_id)
RETURNING service_id, seq, reason, at;
