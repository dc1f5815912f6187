-- The status page's reads. Each is bounded: open batches through the partial index over
-- unfinished batches, history through the last rows of the append-only logs (their primary
-- keys), never a scan of every batch ever stored.

-- name: UIOpenBatches :many
-- Unfinished batches per service_id and state, with the age of the oldest (database clock).
SELECT service_id, state, count(*)::bigint AS batches,
       EXTRACT(EPOCH FROM now() - min(created_at))::float8 AS oldest_seconds
FROM batchclaim.batches
WHERE unfinished
GROUP BY service_id, state
ORDER BY service_id, state;

-- name: UIServiceOwners :many
-- The instance holding each of the given service_ids (those held).
SELECT c.service_id, i.name
FROM batchclaim.service_id_claims c
JOIN batchclaim.instances i ON i.id = c.claimant
WHERE c.service_id = ANY(sqlc.arg(service_ids)::text[]);

-- name: UITransitionsRecent :many
-- The newest batch state changes, with who made them: the last rows of the transition log and
-- of the attempt log (a POST's mark and outcome), each read by its primary key, and the
-- attempts that committed their batch (which write no row), from the batches that finished
-- last (batches_finished_idx). A POST's row is written with its outcome, so its mark shows
-- from then on, at the time it was made.
WITH committed AS (
    SELECT r.seq, r.started_at, r.finished_at, r.from_state, r.epoch, r.instance_id
    FROM (SELECT b.seq FROM batchclaim.batches b WHERE b.finished_at IS NOT NULL
          ORDER BY b.finished_at DESC LIMIT sqlc.arg(max_rows)::int) c
    JOIN batchclaim.batch_row_attempts r ON r.seq = c.seq
    WHERE r.batch_state = 'COMMITTED'
),
t AS (
    SELECT x.seq, x.at, x.from_state, x.to_state, x.epoch, x.instance_id
    FROM (SELECT * FROM batchclaim.batch_transitions ORDER BY id DESC LIMIT sqlc.arg(max_rows)::int) x
    UNION ALL
    SELECT a.seq, a.started_at, a.from_state, 'INFLIGHT', a.epoch, a.instance_id
    FROM (SELECT * FROM batchclaim.submission_attempts ORDER BY id DESC LIMIT sqlc.arg(max_rows)::int) a
    WHERE a.from_state IS NOT NULL
    UNION ALL
    SELECT a.seq, a.finished_at, 'INFLIGHT', a.to_state, a.epoch, a.instance_id
    FROM (SELECT * FROM batchclaim.submission_attempts ORDER BY id DESC LIMIT sqlc.arg(max_rows)::int) a
    WHERE a.from_state IS NOT NULL AND a.to_state IS NOT NULL
    UNION ALL
    SELECT c.seq, c.started_at, c.from_state, 'INFLIGHT', c.epoch, c.instance_id FROM committed c
    UNION ALL
    SELECT c.seq, c.finished_at, 'INFLIGHT', 'COMMITTED', c.epoch, c.instance_id FROM committed c
)
SELECT t.at::timestamptz AS at, t.from_state, t.to_state::text AS to_state, t.epoch, b.seq, b.service_id, b.batch_id,
       t.instance_id, i.name AS instance_name
FROM t
JOIN batchclaim.batches b ON b.seq = t.seq
LEFT JOIN batchclaim.instances i ON i.id = t.instance_id
ORDER BY t.at DESC
LIMIT sqlc.arg(max_rows)::int;

-- name: UITransitionsPerBucket :many
-- State changes per target state in buckets of bucket_ms over the last window_ms, bucket 0
-- being the newest. Only the last scan rows of each log, and the last scan batches to finish,
-- are read, so a very busy window is cut. A POST's mark is counted once its row is written,
-- with its outcome, in the bucket of its time; the mark and outcome of an attempt that
-- committed its batch (which writes no row) once the batch finished.
WITH committed AS (
    SELECT r.started_at, r.finished_at
    FROM (SELECT b.seq FROM batchclaim.batches b
          WHERE b.finished_at > now() - sqlc.arg(window_ms)::bigint * interval '1 millisecond'
          ORDER BY b.finished_at DESC LIMIT sqlc.arg(scan)::bigint) c
    JOIN batchclaim.batch_row_attempts r ON r.seq = c.seq
    WHERE r.batch_state = 'COMMITTED'
),
t AS (
    SELECT x.at, x.to_state FROM batchclaim.batch_transitions x
    WHERE x.id > (SELECT COALESCE(max(id), 0) FROM batchclaim.batch_transitions) - sqlc.arg(scan)::bigint
    UNION ALL
    SELECT a.started_at, 'INFLIGHT' FROM batchclaim.submission_attempts a
    WHERE a.id > (SELECT COALESCE(max(id), 0) FROM batchclaim.submission_attempts) - sqlc.arg(scan)::bigint AND a.from_state IS NOT NULL
    UNION ALL
    SELECT a.finished_at, a.to_state FROM batchclaim.submission_attempts a
    WHERE a.id > (SELECT COALESCE(max(id), 0) FROM batchclaim.submission_attempts) - sqlc.arg(scan)::bigint
      AND a.from_state IS NOT NULL AND a.to_state IS NOT NULL
    UNION ALL
    SELECT c.started_at, 'INFLIGHT' FROM committed c
    UNION ALL
    SELECT c.finished_at, 'COMMITTED' FROM committed c
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
    FROM (SELECT * FROM batchclaim.claim_events ORDER BY id DESC LIMIT sqlc.arg(scan)::int) e
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
    SELECT x.instance_id, x.at FROM batchclaim.claim_events x
    WHERE x.service_id = v.service_id AND x.id > v.id AND x.event = 'acquired' AND x.epoch > v.epoch
    ORDER BY x.id LIMIT 1
) a ON true
LEFT JOIN batchclaim.instances fi ON fi.id = v.instance_id
LEFT JOIN batchclaim.instances ti ON ti.id = a.instance_id
ORDER BY v.id DESC;

-- name: ServiceHaltDelete :one
-- Resumes a halted service_id: the queuer sends its batches again from its next cycle.
DELETE FROM batchclaim.service_halts WHERE service_id = sqlc.arg(service_id)
RETURNING service_id, seq, reason, at;

-- The job view's reads: one batch, one service_id, a search, a list. Each reads through an
-- index and returns a bounded number of rows (LIMIT), never a payload.

-- name: UIBatchSearchLedger :many
-- Ledger batches whose id starts with prefix, through the unique index over ledger batch ids.
-- upper is the prefix with its last hex digit raised by one (or the prefix followed by a
-- character past every hex digit), so the range is the prefix's under any collation that
-- orders digits before letters; starts_with keeps the answer exact whatever the collation.
SELECT seq, service_id, batch_id, state, created_at, updated_at
FROM batchclaim.batches
WHERE ledger AND batch_id >= sqlc.arg(prefix)::text AND batch_id < sqlc.arg(upper)::text
  AND starts_with(batch_id, sqlc.arg(prefix)::text)
ORDER BY batch_id, seq
LIMIT sqlc.arg(max_rows)::int;

-- name: UIServiceSearch :many
-- Known service_ids (service_id_claims holds every service_id ever seen) that start with
-- prefix, among the first scan that sort at or after it by its primary key: bounded whatever
-- the number of service_ids, and complete where the collation keeps a prefix's matches
-- together (C, and any for the usual names).
SELECT k.service_id
FROM (SELECT service_id FROM batchclaim.service_id_claims WHERE service_id >= sqlc.arg(prefix)::text
      ORDER BY service_id LIMIT sqlc.arg(scan)::int) k
WHERE starts_with(k.service_id, sqlc.arg(prefix)::text)
ORDER BY k.service_id
LIMIT sqlc.arg(max_rows)::int;

-- name: UIBatch :one
-- One batch without its payload, with the name of the instance that last wrote it, and its
-- kind, own timeout and recorded output (package jobs).
SELECT b.seq, b.service_id, b.batch_id, b.state, b.attempts, b.created_at, b.updated_at,
       b.submitted_at, b.next_attempt_at, b.finished_at, b.last_error, b.dlt_status,
       b.status_updated_at, b.unknown_count, b.invalid_details, b.ledger, b.claim_epoch,
       b.claimant, i.name AS claimant_name, length(b.payload)::bigint AS payload_bytes,
       b.kind, b.timeout_ms, b.output
FROM batchclaim.batches b
LEFT JOIN batchclaim.instances i ON i.id = b.claimant
WHERE b.seq = sqlc.arg(seq);

-- name: UIBatchAttempts :many
-- The newest POST attempts of one batch, newest first, each numbered from the first: the rows
-- of the attempt log (written in attempt order, when each ended) and the last attempt its
-- batch row carries while no row of it exists (batch_row_attempts): a POST in flight, or the
-- attempt that committed the batch.
WITH a AS (
    SELECT x.id, x.instance_id, x.epoch, x.reason, x.started_at, x.finished_at, x.http_status, x.latency_ms, x.outcome, x.error
    FROM batchclaim.submission_attempts x
    WHERE x.seq = sqlc.arg(seq)
    UNION ALL
    SELECT NULL::bigint, r.instance_id, r.epoch, r.reason, r.started_at, r.finished_at, r.http_status,
           r.latency_ms, r.outcome, NULL::text
    FROM batchclaim.batch_row_attempts r
    WHERE r.seq = sqlc.arg(seq)
)
SELECT row_number() OVER (ORDER BY a.id NULLS LAST)::bigint AS number, a.instance_id,
       i.name AS instance_name, a.epoch, a.reason, a.started_at,
       a.finished_at, a.http_status, a.latency_ms, a.outcome, a.error
FROM a
LEFT JOIN batchclaim.instances i ON i.id = a.instance_id
ORDER BY a.id DESC NULLS FIRST
LIMIT sqlc.arg(max_rows)::int;

-- name: UIBatchTransitions :many
-- The state changes of one batch (batch_history: the transition log and the attempts' marks
-- and outcomes), in order, the newest max_rows.
SELECT h.at::timestamptz AS at, h.from_state, h.to_state::text AS to_state, h.epoch,
       h.instance_id, i.name AS instance_name, h.detail
FROM (
    SELECT * FROM batchclaim.batch_history x WHERE x.seq = sqlc.arg(seq)
    ORDER BY x.at DESC LIMIT sqlc.arg(max_rows)::int
) h
LEFT JOIN batchclaim.instances i ON i.id = h.instance_id
ORDER BY h.at;

-- name: UIServiceQueue :many
-- The unfinished batches of one service_id in queue order (pos: a retried batch is at the
-- back), after the batch after_seq (0: from the start), through the partial index over
-- unfinished batches. A cursor batch that finished meanwhile still marks its place.
SELECT b.seq, b.batch_id, b.state, b.attempts, b.created_at, b.updated_at, b.next_attempt_at, b.last_error, b.kind
FROM batchclaim.batches b
WHERE b.service_id = sqlc.arg(service_id) AND b.unfinished
  AND b.pos > COALESCE((SELECT c.pos FROM batchclaim.batches c WHERE c.seq = sqlc.arg(after_seq)::bigint), 0)
ORDER BY b.pos
LIMIT sqlc.arg(max_rows)::int;

-- name: UIServiceSummary :one
-- One service_id: whether it is known, its claim (owner, epoch, phase), its halt and how many
-- of its batches are unfinished.
SELECT (EXISTS (SELECT 1 FROM batchclaim.service_id_claims k WHERE k.service_id = sqlc.arg(service_id))
           OR EXISTS (SELECT 1 FROM batchclaim.batches x WHERE x.service_id = sqlc.arg(service_id)))::bool AS known,
       COALESCE(c.claimant_name, '')::text AS owner,
       COALESCE(c.epoch, 0)::bigint AS epoch,
       COALESCE(c.phase, 'free')::text AS phase,
       c.claimed_at,
       (SELECT count(*) FROM batchclaim.batches o WHERE o.service_id = sqlc.arg(service_id) AND o.unfinished)::bigint AS unfinished,
       h.seq AS halt_seq, h.reason AS halt_reason, h.at AS halt_at
FROM (SELECT 1) one
LEFT JOIN batchclaim.service_id_claims_effective c ON c.service_id = sqlc.arg(service_id)
LEFT JOIN batchclaim.service_halts h ON h.service_id = sqlc.arg(service_id);

-- name: UIServiceOwnership :many
-- The newest ownership events of one service_id (acquisitions, releases, voids with their
-- epochs), newest first. Instances are named by the start of their id once their row was
-- pruned.
SELECT e.id, e.at, e.event, e.epoch,
       COALESCE(i.name, left(e.instance_id::text, 8))::text AS instance
FROM batchclaim.claim_events e
LEFT JOIN batchclaim.instances i ON i.id = e.instance_id
WHERE e.service_id = sqlc.arg(service_id)
ORDER BY e.id DESC
LIMIT sqlc.arg(max_rows)::int;

-- name: UIBatchList :many
-- Batches changed within the last window_ms, newest seq first, with seq in [floor_seq,
-- before_seq), optionally of one state, one service_id and one kind. The seq range bounds the
-- rows read (backwards through the primary key) however rare the filtered batches are.
SELECT seq, service_id, batch_id, state, attempts, created_at, updated_at, kind
FROM batchclaim.batches
WHERE seq < sqlc.arg(before_seq)::bigint AND seq >= sqlc.arg(floor_seq)::bigint
  AND updated_at > now() - sqlc.arg(window_ms)::bigint * interval '1 millisecond'
  AND (sqlc.arg(state)::text = '' OR state = sqlc.arg(state)::text)
  AND (sqlc.arg(service_id)::text = '' OR service_id = sqlc.arg(service_id)::text)
  AND (sqlc.arg(kind)::text = '' OR kind = sqlc.arg(kind)::text)
ORDER BY seq DESC
LIMIT sqlc.arg(max_rows)::int;

-- name: UIBatchSeqMax :one
-- The newest batch's seq (0 when there is none), read from the end of the primary key.
SELECT COALESCE(max(seq), 0)::bigint AS seq FROM batchclaim.batches;
