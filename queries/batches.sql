-- Batches. Every state change is one conditional UPDATE (expected state, and for an owner's
-- writes the claim epoch), run in a transaction that first fenced the claim row.

-- name: BatchInsert :one
-- Stores a batch after every batch of its service_id committed before it. Enqueues of one
-- service_id are serialized by a transaction-scoped advisory lock taken before seq is drawn,
-- so seq order is commit order: a transaction that drew a lower seq has committed (or rolled
-- back) before the next one can draw. The lock is held to the end of the caller's transaction
-- (or of this statement alone when it runs outside one).
-- Idempotent on (service_id, batch_id): a batch stored twice keeps its first seq. No row
-- comes back on any conflict, including a ledger batch id stored under another service_id.
-- The service_id's claim row is created under the same lock, so that an owner dropping the
-- row as idle (ClaimsLockIdle, ClaimsDropIdle) either sees this batch or runs entirely before
-- this statement takes the lock, and then the row is created again here.
WITH serial AS (
    SELECT pg_advisory_xact_lock(hashtext('batchclaim.enqueue'), hashtext(sqlc.arg(service_id)::text)) AS locked
),
registered AS (
    INSERT INTO service_id_claims (service_id)
    SELECT sqlc.arg(service_id)::text FROM serial
    ON CONFLICT (service_id) DO NOTHING
)
INSERT INTO batches (service_id, batch_id, payload, ledger)
SELECT sqlc.arg(service_id)::text, sqlc.arg(batch_id)::text, sqlc.arg(payload)::bytea, sqlc.arg(ledger)::bool FROM serial
ON CONFLICT DO NOTHING
RETURNING seq, created_at;

-- name: BatchLedgerOwner :one
-- The service_id a ledger batch id is stored under.
SELECT service_id, seq FROM batches WHERE batch_id = sqlc.arg(batch_id) AND ledger;

-- name: BatchBySeq :one
SELECT seq, service_id, batch_id, state, created_at FROM batches WHERE seq = sqlc.arg(seq);

-- name: BatchLookup :one
SELECT seq, state, created_at FROM batches
WHERE service_id = sqlc.arg(service_id) AND batch_id = sqlc.arg(batch_id);

-- name: BatchHeads :many
-- The oldest unfinished batch of each given service_id (one index probe each), with what
-- the queuer needs to decide whether it can go now, judged by the database clock. With
-- skip_valid, VALID batches count as done for ordering (adapters whose VALID fixes order).
-- The payload is not read here: the in-flight mark returns it for the batches that go.
SELECT h.seq, h.service_id, h.batch_id, h.state, h.attempts, h.claim_epoch, h.claimant,
       h.unknown_count,
       (h.next_attempt_at IS NULL OR h.next_attempt_at <= now())::bool AS due,
       -- The UNKNOWN grace runs from the last POST, not from the last status write (every
       -- poll writes one).
       EXTRACT(EPOCH FROM now() - COALESCE(h.submitted_at, h.created_at))::float8 AS since_post_seconds
FROM unnest(sqlc.arg(service_ids)::text[]) AS s(service_id)
CROSS JOIN LATERAL (
    SELECT b.* FROM batches b
    WHERE b.service_id = s.service_id
      AND b.state NOT IN ('COMMITTED', 'INVALID')
      AND NOT (sqlc.arg(skip_valid)::bool AND b.state = 'VALID')
    ORDER BY b.seq
    LIMIT 1
) h
WHERE NOT EXISTS (SELECT 1 FROM service_halts x WHERE x.service_id = s.service_id);

-- The data path writes sets: one statement marks every batch a round hands out, one records
-- every outcome that arrived, one records a poll's answers. Each is fenced per row: a row
-- whose claim is no longer held with its epoch (or whose registry row is not this process's)
-- is left alone and reported for that row alone; the others go ahead. Each writes its
-- attempt and transition log rows in the same statement. Claim rows are locked in
-- service_id order, so that two of these statements never wait for each other in a cycle.

-- name: BatchesMarkInflight :many
-- Marks the given heads in flight before their POSTs, each only if its claim is held with
-- its epoch while the lease is in phase one by the database clock, and the batch is still in
-- the state it was handed out in. Marks the claim busy (submitting_since) in the same
-- statement: being an UPDATE of the claim row, it conflicts with a concurrent takeover of
-- that row, and one of the two wins. A POST starts the count of UNKNOWN answers afresh.
-- Returns, per head, whether its claim held, and for the heads marked their payload, attempt
-- count and attempt-log id.
WITH want AS (
    SELECT unnest(sqlc.arg(seqs)::bigint[]) AS seq,
           unnest(sqlc.arg(service_ids)::text[]) AS service_id,
           unnest(sqlc.arg(epochs)::bigint[]) AS epoch,
           unnest(sqlc.arg(from_states)::text[]) AS from_state,
           unnest(sqlc.arg(reasons)::text[]) AS reason
),
lease AS (
    SELECT i.id FROM instances i
    WHERE i.id = sqlc.arg(claimant)::uuid AND i.nonce = sqlc.arg(nonce)::uuid
      AND i.expiry_1 > COALESCE(sqlc.narg(now)::timestamptz, now())
),
locked AS (
    SELECT c.service_id, c.epoch FROM service_id_claims c
    JOIN want w ON w.service_id = c.service_id AND w.epoch = c.epoch
    WHERE c.claimant = (SELECT id FROM lease)
      AND EXISTS (SELECT 1 FROM batches b WHERE b.seq = w.seq AND b.state = w.from_state)
    ORDER BY c.service_id
    FOR UPDATE OF c
),
claimed AS (
    UPDATE service_id_claims c
    SET submitting_since = COALESCE(c.submitting_since, COALESCE(sqlc.narg(now)::timestamptz, now()))
    FROM locked l
    WHERE c.service_id = l.service_id AND c.epoch = l.epoch
    RETURNING c.service_id, c.epoch
),
marked AS (
    UPDATE batches b
    SET state = 'INFLIGHT', attempts = b.attempts + 1, claimant = sqlc.arg(claimant)::uuid,
        claim_epoch = w.epoch, submitted_at = now(), updated_at = now(),
        next_attempt_at = NULL, unknown_count = 0
    FROM want w JOIN claimed k ON k.service_id = w.service_id AND k.epoch = w.epoch
    WHERE b.seq = w.seq AND b.state = w.from_state
    RETURNING b.seq, b.service_id, b.batch_id, b.payload, b.attempts, w.epoch, w.from_state, w.reason
),
attempt AS (
    INSERT INTO submission_attempts (seq, service_id, batch_id, instance_id, epoch, reason)
    SELECT m.seq, m.service_id, m.batch_id, sqlc.arg(claimant)::uuid, m.epoch, m.reason FROM marked m
    RETURNING id, seq
),
logged AS (
    INSERT INTO batch_transitions (seq, from_state, to_state, instance_id, epoch, detail)
    SELECT m.seq, m.from_state, 'INFLIGHT', sqlc.arg(claimant)::uuid, m.epoch, m.reason FROM marked m
)
SELECT w.seq::bigint AS seq, (k.service_id IS NOT NULL)::bool AS fenced, (m.seq IS NOT NULL)::bool AS marked,
       COALESCE(m.payload, ''::bytea)::bytea AS payload, COALESCE(m.attempts, 0)::int AS attempts,
       COALESCE(a.id, 0)::bigint AS attempt_id
FROM want w
LEFT JOIN claimed k ON k.service_id = w.service_id AND k.epoch = w.epoch
LEFT JOIN marked m ON m.seq = w.seq
LEFT JOIN attempt a ON a.seq = w.seq;

-- name: BatchesRecordOutcomes :many
-- Records the outcomes of POSTs marked in flight by this instance, each fenced on its claim,
-- and ends the claims' submissions. A late answer after a takeover matches no row (the new
-- owner's write changed claim_epoch or state). An empty text or a zero number means none.
-- A new outcome starts the clock and the count of UNKNOWN answers afresh: an UNKNOWN outcome
-- is resubmitted only after new answers from the ledger (or the grace period).
WITH o AS (
    SELECT unnest(sqlc.arg(seqs)::bigint[]) AS seq,
           unnest(sqlc.arg(service_ids)::text[]) AS service_id,
           unnest(sqlc.arg(epochs)::bigint[]) AS epoch,
           unnest(sqlc.arg(new_states)::text[]) AS new_state,
           unnest(sqlc.arg(dlt_statuses)::text[]) AS dlt_status,
           unnest(sqlc.arg(retry_after_ms)::bigint[]) AS retry_after_ms,
           unnest(sqlc.arg(last_errors)::text[]) AS last_error,
           unnest(sqlc.arg(invalid_details)::text[]) AS invalid,
           unnest(sqlc.arg(attempt_ids)::bigint[]) AS attempt_id,
           unnest(sqlc.arg(http_statuses)::int[]) AS http_status,
           unnest(sqlc.arg(latencies_ms)::float8[]) AS latency_ms,
           unnest(sqlc.arg(outcomes)::text[]) AS outcome
),
locked AS (
    SELECT c.service_id, c.epoch FROM service_id_claims c
    JOIN (SELECT DISTINCT o.service_id, o.epoch FROM o) w ON w.service_id = c.service_id AND w.epoch = c.epoch
    WHERE c.claimant = sqlc.arg(claimant)::uuid
      AND EXISTS (SELECT 1 FROM instances i WHERE i.id = sqlc.arg(claimant)::uuid AND i.nonce = sqlc.arg(nonce)::uuid)
    ORDER BY c.service_id
    FOR UPDATE OF c
),
ended AS (
    UPDATE service_id_claims c
    SET submitting_since = NULL, active_at = now()
    FROM locked l
    WHERE c.service_id = l.service_id AND c.epoch = l.epoch
    RETURNING c.service_id, c.epoch
),
recorded AS (
    UPDATE batches b
    SET state = o.new_state,
        dlt_status = COALESCE(NULLIF(o.dlt_status, ''), b.dlt_status),
        status_updated_at = now(),
        next_attempt_at = now() + o.retry_after_ms * interval '1 millisecond',
        last_error = NULLIF(o.last_error, ''),
        invalid_details = COALESCE(NULLIF(o.invalid, '')::jsonb, b.invalid_details),
        unknown_count = 0,
        updated_at = now()
    FROM o JOIN ended e ON e.service_id = o.service_id AND e.epoch = o.epoch
    WHERE b.seq = o.seq AND b.state = 'INFLIGHT' AND b.claim_epoch = o.epoch
      AND b.claimant = sqlc.arg(claimant)::uuid
    RETURNING b.seq, EXTRACT(EPOCH FROM now() - b.created_at)::float8 AS age_seconds
),
attempted AS (
    UPDATE submission_attempts a
    SET finished_at = now(), http_status = NULLIF(o.http_status, 0), latency_ms = o.latency_ms,
        outcome = o.outcome, error = NULLIF(o.last_error, '')
    FROM o JOIN recorded r ON r.seq = o.seq
    WHERE a.id = o.attempt_id AND a.finished_at IS NULL
),
logged AS (
    INSERT INTO batch_transitions (seq, from_state, to_state, instance_id, epoch, detail)
    SELECT o.seq, 'INFLIGHT', o.new_state, sqlc.arg(claimant)::uuid, o.epoch, o.outcome
    FROM o JOIN recorded r ON r.seq = o.seq
),
halted AS (
    INSERT INTO service_halts (service_id, seq, reason)
    SELECT o.service_id, o.seq, 'batch INVALID: ' || o.last_error
    FROM o JOIN recorded r ON r.seq = o.seq
    WHERE sqlc.arg(halt_on_invalid)::bool AND o.new_state = 'INVALID'
    ON CONFLICT (service_id) DO NOTHING
)
SELECT o.seq::bigint AS seq, (e.service_id IS NOT NULL)::bool AS fenced, (r.seq IS NOT NULL)::bool AS recorded,
       COALESCE(r.age_seconds, 0)::float8 AS age_seconds
FROM o
LEFT JOIN ended e ON e.service_id = o.service_id AND e.epoch = o.epoch
LEFT JOIN recorded r ON r.seq = o.seq;

-- name: BatchesRecordStatuses :many
-- Records what the ledger said about batches of claimed service_ids (or the adoption of an
-- orphaned in-flight batch), each fenced on its claim (a shared lock on the claim row until
-- the statement ends, so no takeover commits in between) and each only if the batch is still
-- in the state it was asked about in. Only an answer from the ledger counts towards the
-- consecutive UNKNOWN answers; an adoption does not. With end_submission, the claim's
-- submission mark is cleared (an adoption under the epoch that left it). Callers leave out
-- answers that change nothing, so a poll that learns nothing writes nothing.
WITH u AS (
    SELECT unnest(sqlc.arg(seqs)::bigint[]) AS seq,
           unnest(sqlc.arg(service_ids)::text[]) AS service_id,
           unnest(sqlc.arg(epochs)::bigint[]) AS epoch,
           unnest(sqlc.arg(from_states)::text[]) AS from_state,
           unnest(sqlc.arg(new_states)::text[]) AS new_state,
           unnest(sqlc.arg(dlt_statuses)::text[]) AS dlt_status,
           unnest(sqlc.arg(answers)::bool[]) AS answer,
           unnest(sqlc.arg(invalid_details)::text[]) AS invalid,
           unnest(sqlc.arg(details)::text[]) AS detail,
           unnest(sqlc.arg(end_submissions)::bool[]) AS end_submission
),
fenced AS (
    SELECT c.service_id, c.epoch FROM service_id_claims c
    JOIN (SELECT DISTINCT u.service_id, u.epoch FROM u) w ON w.service_id = c.service_id AND w.epoch = c.epoch
    WHERE c.claimant = sqlc.arg(claimant)::uuid
      AND EXISTS (SELECT 1 FROM instances i WHERE i.id = sqlc.arg(claimant)::uuid AND i.nonce = sqlc.arg(nonce)::uuid)
    ORDER BY c.service_id
    FOR SHARE OF c
),
recorded AS (
    UPDATE batches b
    SET state = u.new_state,
        dlt_status = u.dlt_status,
        status_updated_at = now(),
        unknown_count = CASE WHEN u.dlt_status <> 'UNKNOWN' THEN 0
                             WHEN u.answer THEN b.unknown_count + 1
                             ELSE b.unknown_count END,
        invalid_details = COALESCE(NULLIF(u.invalid, '')::jsonb, b.invalid_details),
        claimant = sqlc.arg(claimant)::uuid, claim_epoch = u.epoch,
        updated_at = now()
    FROM u JOIN fenced f ON f.service_id = u.service_id AND f.epoch = u.epoch
    WHERE b.seq = u.seq AND b.state = u.from_state
    RETURNING b.seq, EXTRACT(EPOCH FROM now() - b.created_at)::float8 AS age_seconds
),
logged AS (
    INSERT INTO batch_transitions (seq, from_state, to_state, instance_id, epoch, detail)
    SELECT u.seq, u.from_state, u.new_state, sqlc.arg(claimant)::uuid, u.epoch, u.detail
    FROM u JOIN recorded r ON r.seq = u.seq
    WHERE u.new_state <> u.from_state
),
halted AS (
    INSERT INTO service_halts (service_id, seq, reason)
    SELECT u.service_id, u.seq, 'batch INVALID'
    FROM u JOIN recorded r ON r.seq = u.seq
    WHERE sqlc.arg(halt_on_invalid)::bool AND u.new_state = 'INVALID'
    ON CONFLICT (service_id) DO NOTHING
),
ended AS (
    UPDATE service_id_claims c
    SET submitting_since = NULL
    FROM (SELECT DISTINCT u.service_id, u.epoch FROM u WHERE u.end_submission) w
    JOIN fenced f ON f.service_id = w.service_id AND f.epoch = w.epoch
    WHERE c.service_id = w.service_id AND c.epoch = w.epoch AND c.claimant = sqlc.arg(claimant)::uuid
)
SELECT u.seq::bigint AS seq, (f.service_id IS NOT NULL)::bool AS fenced, (r.seq IS NOT NULL)::bool AS recorded,
       COALESCE(r.age_seconds, 0)::float8 AS age_seconds
FROM u
LEFT JOIN fenced f ON f.service_id = u.service_id AND f.epoch = u.epoch
LEFT JOIN recorded r ON r.seq = u.seq;

-- name: BatchesToPoll :many
-- Batches whose outcome the ledger still has to tell, of the given (claimed) service_ids:
-- accepted (PENDING), executed (VALID) or unknown; a page of them in (service_id, seq)
-- order after the cursor (after_service_id, after_seq), so that the poller rotates through
-- all of them however many there are.
SELECT b.seq, b.service_id, b.batch_id, b.state
FROM batches b
WHERE b.service_id = ANY(sqlc.arg(service_ids)::text[])
  AND b.state IN ('PENDING', 'VALID', 'UNKNOWN')
  AND (b.service_id, b.seq) > (sqlc.arg(after_service_id)::text, sqlc.arg(after_seq)::bigint)
ORDER BY b.service_id, b.seq
LIMIT sqlc.arg(max_rows);

-- name: ServiceHalt :exec
INSERT INTO service_halts (service_id, seq, reason) VALUES (sqlc.arg(service_id), sqlc.arg(seq), sqlc.arg(reason))
ON CONFLICT (service_id) DO NOTHING;

-- name: BatchStatusesByID :many
-- For the ingest API's GET /batch_statuses.
SELECT batch_id, service_id, state, dlt_status, invalid_details
FROM batches WHERE batch_id = ANY(sqlc.arg(batch_ids)::text[]);

-- name: BatchStateCounts :many
SELECT service_id, state, count(*)::bigint AS batches,
       COALESCE(EXTRACT(EPOCH FROM now() - min(created_at) FILTER (WHERE state NOT IN ('COMMITTED', 'INVALID'))), 0)::float8 AS oldest_open_seconds
FROM batches
GROUP BY service_id, state
ORDER BY service_id, state;

-- name: BatchStateTotals :many
SELECT state, count(*)::bigint AS batches FROM batches GROUP BY state;

-- name: BatchOpenStateTotals :many
-- Unfinished batches by state, for the /metrics gauge: the predicate is batches_open_idx's,
-- so a scrape reads open batches only, however many finished ones the table holds.
SELECT state, count(*)::bigint AS batches,
       COALESCE(EXTRACT(EPOCH FROM now() - min(created_at)), 0)::float8 AS oldest_seconds
FROM batches
WHERE state NOT IN ('COMMITTED', 'INVALID')
GROUP BY state;

-- name: ServiceHalts :many
SELECT service_id, seq, reason, at FROM service_halts ORDER BY service_id;

-- name: InstanceProgress :many
-- Per instance: claims held, batches it has in flight, batches it recorded COMMITTED.
SELECT i.id, i.name,
       (SELECT count(*) FROM service_id_claims c WHERE c.claimant = i.id)::bigint AS claims,
       (SELECT count(*) FROM batches b WHERE b.state = 'INFLIGHT' AND b.claimant = i.id)::bigint AS in_flight,
       (SELECT count(*) FROM batch_transitions t WHERE t.to_state = 'COMMITTED' AND t.instance_id = i.id)::bigint AS committed
FROM instances i
ORDER BY i.name;

-- name: DuplicateExplainers :many
-- Per batch: how many of its submissions had an outcome nobody saw (unknown, or never
-- recorded because the submitter died, hung or lost its claim) and how many times the ledger
-- said it did not know an accepted batch. Each one explains one more POST of the batch.
SELECT b.batch_id,
       ((SELECT count(*) FROM submission_attempts a WHERE a.seq = b.seq AND (a.outcome IS NULL OR a.outcome = 'unknown'))
      + (SELECT count(*) FROM batch_transitions t WHERE t.seq = b.seq AND t.to_state = 'UNKNOWN'
           AND t.from_state IN ('PENDING', 'VALID')))::bigint AS explainers
FROM batches b;

-- name: BatchSeqs :many
SELECT batch_id, service_id, seq, state FROM batches;
