-- Package heartbeat's queries. Time is the database's: now(), or the optional now a test
-- passes to move the database's view of time. Durations are stored as milliseconds.

-- name: HeartbeatConfigBump :one
-- Locks the configuration row for the rest of the transaction (reconfigurations never
-- interleave) and starts a new generation.
UPDATE batchclaim.heartbeat_config SET generation = generation + 1, updated_at = now()
WHERE singleton
RETURNING generation;

-- name: HeartbeatEventTypesInvalidateAll :execrows
-- Step one of a reconfiguration: every entry invalid until the new configuration names it.
UPDATE batchclaim.heartbeat_event_types SET valid = false, updated_at = now() WHERE valid;

-- name: HeartbeatEventTypeUpsert :exec
INSERT INTO batchclaim.heartbeat_event_types (event_name, interval_ms, missed_count, control_loop, valid, generation, updated_at)
VALUES (sqlc.arg(event_name)::text, sqlc.arg(interval_ms)::bigint, sqlc.arg(missed_count)::integer,
        sqlc.arg(control_loop)::jsonb, true, sqlc.arg(generation)::bigint, now())
ON CONFLICT (event_name) DO UPDATE
SET interval_ms = EXCLUDED.interval_ms, missed_count = EXCLUDED.missed_count,
    control_loop = EXCLUDED.control_loop, valid = true, generation = EXCLUDED.generation, updated_at = now();

-- name: HeartbeatEventTypeInvalidate :execrows
UPDATE batchclaim.heartbeat_event_types SET valid = false, generation = sqlc.arg(generation)::bigint, updated_at = now()
WHERE event_name = sqlc.arg(event_name)::text AND valid;

-- name: HeartbeatEventTypeList :many
SELECT t.event_name, t.interval_ms, t.missed_count, t.control_loop, t.valid, t.generation, t.updated_at,
       (SELECT count(*) FROM batchclaim.heartbeat_sources s WHERE s.event_name = t.event_name)::bigint AS sources
FROM batchclaim.heartbeat_event_types t
ORDER BY t.event_name;

-- name: HeartbeatRecord :one
-- Stores a heartbeat of a valid event type, stamped with the database's clock. No row when
-- the event type is unknown or invalid (the heartbeat is discarded). A new source's episode
-- count starts from its highest stored event, so episode numbers never repeat. A heartbeat
-- that ends a silence of missed_count intervals that no step raised marks it late, so that
-- the next step raises (and clears) it although the source is beating again.
INSERT INTO batchclaim.heartbeat_sources AS s (event_name, source_name, first_received_at, received_at, last_epoch_microsec, heartbeats, episodes)
SELECT t.event_name, sqlc.arg(source_name)::text, now(), now(), sqlc.arg(last_epoch_microsec)::bigint, 1,
       COALESCE((SELECT max(e.episode) FROM batchclaim.heartbeat_events e
                 WHERE e.event_name = t.event_name AND e.source_name = sqlc.arg(source_name)::text), 0)::bigint
FROM batchclaim.heartbeat_event_types t
WHERE t.event_name = sqlc.arg(event_name)::text AND t.valid
ON CONFLICT (event_name, source_name) DO UPDATE
SET received_at = now(), last_epoch_microsec = EXCLUDED.last_epoch_microsec, heartbeats = s.heartbeats + 1,
    (late_heartbeat, late_received_at, late_epoch_microsec) = (
        SELECT CASE WHEN late THEN s.heartbeats ELSE s.late_heartbeat END,
               CASE WHEN late THEN s.received_at ELSE s.late_received_at END,
               CASE WHEN late THEN s.last_epoch_microsec ELSE s.late_epoch_microsec END
        FROM (SELECT s.late_heartbeat IS NULL
                     -- not the silence the open episode was raised for
                     AND NOT (s.raised AND s.raised_heartbeat = s.heartbeats)
                     AND s.received_at + t.missed_count * t.interval_ms * interval '1 millisecond' <= now() AS late
              FROM batchclaim.heartbeat_event_types t WHERE t.event_name = s.event_name) l)
RETURNING s.received_at, s.heartbeats, s.raised, s.episodes;

-- name: HeartbeatRaiseDue :many
-- Raises, once, every source of a valid event type whose last heartbeat is missed_count
-- intervals old by the database's clock, or that has a late silence, and that is not raised
-- yet. The UPDATE locks each source row and re-checks the condition on its latest version,
-- so a heartbeat committed first wins; the unique key of heartbeat_events forbids a second
-- raise of an episode. A late silence's event names the heartbeat before the silence.
WITH due AS (
    UPDATE batchclaim.heartbeat_sources s
    SET episodes = s.episodes + 1, raised = true,
        raised_heartbeat = COALESCE(s.late_heartbeat, s.heartbeats),
        late_heartbeat = NULL
    FROM batchclaim.heartbeat_event_types t
    WHERE t.event_name = s.event_name AND t.valid AND NOT s.raised
      AND (s.late_heartbeat IS NOT NULL
           OR s.received_at + t.missed_count * t.interval_ms * interval '1 millisecond'
              <= COALESCE(sqlc.narg(now)::timestamptz, now()))
    -- RETURNING sees the new row: a late raise is one whose raised_heartbeat is behind the
    -- count, and names the heartbeat before its silence through the late_ columns.
    RETURNING s.event_name, s.source_name, s.episodes, s.raised_heartbeat, t.interval_ms, t.missed_count, t.control_loop,
              CASE WHEN s.raised_heartbeat < s.heartbeats THEN s.late_received_at ELSE s.received_at END AS received_at,
              CASE WHEN s.raised_heartbeat < s.heartbeats THEN s.late_epoch_microsec ELSE s.last_epoch_microsec END AS last_epoch_microsec
)
INSERT INTO batchclaim.heartbeat_events (event_name, source_name, episode, kind, reason, last_received_at, last_epoch_microsec,
                              heartbeat_seq, interval_ms, missed_count, control_loop, instance_id, term_epoch)
SELECT due.event_name, due.source_name, due.episodes, 'raised', 'missed', due.received_at, due.last_epoch_microsec,
       due.raised_heartbeat, due.interval_ms, due.missed_count, due.control_loop, sqlc.arg(instance_id)::uuid, sqlc.arg(term_epoch)::bigint
FROM due
RETURNING *;

-- name: HeartbeatClearFresh :many
-- Clears every raised source of a valid event type that has sent a heartbeat since its raise.
WITH fresh AS (
    UPDATE batchclaim.heartbeat_sources s
    SET raised = false, raised_heartbeat = NULL
    FROM batchclaim.heartbeat_event_types t
    WHERE t.event_name = s.event_name AND t.valid AND s.raised AND s.heartbeats > s.raised_heartbeat
    RETURNING s.event_name, s.source_name, s.episodes, s.received_at, s.last_epoch_microsec, s.heartbeats,
              t.interval_ms, t.missed_count, t.control_loop
)
INSERT INTO batchclaim.heartbeat_events (event_name, source_name, episode, kind, reason, last_received_at, last_epoch_microsec,
                              heartbeat_seq, interval_ms, missed_count, control_loop, instance_id, term_epoch)
SELECT f.event_name, f.source_name, f.episodes, 'cleared', 'heartbeat', f.received_at, f.last_epoch_microsec,
       f.heartbeats, f.interval_ms, f.missed_count, f.control_loop, sqlc.arg(instance_id)::uuid, sqlc.arg(term_epoch)::bigint
FROM fresh f
RETURNING *;

-- name: HeartbeatClearRemoved :many
-- Clears the open events of sources whose event type a reconfiguration made invalid, before
-- HeartbeatEventTypesPurge deletes them: no raise is left without its clear.
WITH gone AS (
    UPDATE batchclaim.heartbeat_sources s
    SET raised = false, raised_heartbeat = NULL
    FROM batchclaim.heartbeat_event_types t
    WHERE t.event_name = s.event_name AND NOT t.valid AND s.raised
    RETURNING s.event_name, s.source_name, s.episodes, s.received_at, s.last_epoch_microsec, s.heartbeats,
              t.interval_ms, t.missed_count, t.control_loop
)
INSERT INTO batchclaim.heartbeat_events (event_name, source_name, episode, kind, reason, last_received_at, last_epoch_microsec,
                              heartbeat_seq, interval_ms, missed_count, control_loop, instance_id, term_epoch)
SELECT g.event_name, g.source_name, g.episodes, 'cleared', 'removed', g.received_at, g.last_epoch_microsec,
       g.heartbeats, g.interval_ms, g.missed_count, g.control_loop, sqlc.arg(instance_id)::uuid, sqlc.arg(term_epoch)::bigint
FROM gone g
RETURNING *;

-- name: HeartbeatEventTypesPurge :execrows
-- Deletes invalid event types and, by cascade, their sources (the design's DB monitoring
-- clean-up). A type made valid again meanwhile is kept: the DELETE re-checks valid.
DELETE FROM batchclaim.heartbeat_event_types t
WHERE NOT t.valid
  AND NOT EXISTS (SELECT 1 FROM batchclaim.heartbeat_sources s WHERE s.event_name = t.event_name AND s.raised);

-- name: HeartbeatOutboxDue :many
-- Events not yet delivered whose next attempt is due, oldest first, and for each source only
-- its oldest undelivered event: a source's events are delivered in the order written.
SELECT e.* FROM batchclaim.heartbeat_events e
WHERE e.delivered_at IS NULL
  AND e.next_attempt_at <= now()
  AND NOT EXISTS (SELECT 1 FROM batchclaim.heartbeat_events p
                  WHERE p.delivered_at IS NULL AND p.event_name = e.event_name
                    AND p.source_name = e.source_name AND p.id < e.id)
ORDER BY e.id
LIMIT sqlc.arg(max_events)::integer;

-- name: HeartbeatOutboxDelivered :execrows
UPDATE batchclaim.heartbeat_events SET delivered_at = now(), attempts = attempts + 1, last_error = ''
WHERE id = sqlc.arg(id)::bigint AND delivered_at IS NULL;

-- name: HeartbeatOutboxFailed :execrows
UPDATE batchclaim.heartbeat_events
SET attempts = attempts + 1, last_error = sqlc.arg(last_error)::text,
    next_attempt_at = now() + sqlc.arg(delay_ms)::bigint * interval '1 millisecond'
WHERE id = sqlc.arg(id)::bigint AND delivered_at IS NULL;

-- name: HeartbeatOutboxPending :one
SELECT count(*)::bigint FROM batchclaim.heartbeat_events WHERE delivered_at IS NULL;

-- name: HeartbeatEventList :many
SELECT * FROM batchclaim.heartbeat_events WHERE id > sqlc.arg(after_id)::bigint ORDER BY id LIMIT sqlc.arg(max_events)::integer;

-- name: HeartbeatSourceList :many
SELECT s.event_name, s.source_name, s.first_received_at, s.received_at, s.last_epoch_microsec, s.heartbeats,
       s.episodes, s.raised, EXTRACT(EPOCH FROM now() - s.received_at)::float8 AS silent_seconds
FROM batchclaim.heartbeat_sources s
ORDER BY s.event_name, s.source_name;

-- name: HeartbeatTermHistory :many
-- The election's history of a role, for checking after the fact who was active when.
SELECT epoch, instance_id, event, at FROM batchclaim.election_events
WHERE role = sqlc.arg(role)::text
ORDER BY at, id;
