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
SELECT h.seq, h.service_id, h.batch_id, h.payload, h.state, h.attempts, h.claim_epoch, h.claimant,
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

-- name: BatchMarkInflight :one
-- Fenced by the caller (the claim row is locked by BeginSubmission in the same transaction).
-- A POST starts the count of UNKNOWN answers afresh: only answers about this POST count.
UPDATE batches
SET state = 'INFLIGHT', attempts = attempts + 1, claimant = sqlc.arg(claimant)::uuid,
    claim_epoch = sqlc.arg(epoch)::bigint, submitted_at = now(), updated_at = now(),
    next_attempt_at = NULL, unknown_count = 0
WHERE seq = sqlc.arg(seq) AND state = sqlc.arg(expected_state)::text
RETURNING attempts;

-- name: AttemptStart :one
INSERT INTO submission_attempts (seq, service_id, batch_id, instance_id, epoch, reason)
VALUES (sqlc.arg(seq), sqlc.arg(service_id), sqlc.arg(batch_id), sqlc.arg(instance_id), sqlc.arg(epoch), sqlc.arg(reason))
RETURNING id;

-- name: AttemptFinish :exec
UPDATE submission_attempts
SET finished_at = now(), http_status = sqlc.narg(http_status), latency_ms = sqlc.arg(latency_ms),
    outcome = sqlc.arg(outcome), error = sqlc.narg(error)
WHERE id = sqlc.arg(id) AND finished_at IS NULL;

-- name: BatchRecordOutcome :one
-- The outcome of a POST by the epoch that marked it in flight. A late answer after a
-- takeover matches no row (the new owner's mark changed claim_epoch or state).
UPDATE batches
SET state = sqlc.arg(new_state)::text,
    dlt_status = COALESCE(sqlc.narg(dlt_status)::text, dlt_status),
    -- A new outcome starts the clock and the count of UNKNOWN answers afresh: an UNKNOWN
    -- outcome is resubmitted only after new answers from the ledger (or the grace period).
    status_updated_at = now(),
    next_attempt_at = now() + sqlc.arg(retry_after_ms)::bigint * interval '1 millisecond',
    last_error = sqlc.narg(last_error),
    invalid_details = COALESCE(sqlc.narg(invalid_details)::jsonb, invalid_details),
    unknown_count = 0,
    updated_at = now()
WHERE seq = sqlc.arg(seq) AND state = 'INFLIGHT' AND claim_epoch = sqlc.arg(epoch)::bigint
  AND claimant = sqlc.arg(claimant)::uuid
RETURNING EXTRACT(EPOCH FROM now() - created_at)::float8 AS age_seconds;

-- name: BatchRecordStatus :one
-- A status the ledger reported for a batch of a claimed service_id. Fenced by the caller.
UPDATE batches
SET state = sqlc.arg(new_state)::text,
    dlt_status = sqlc.arg(dlt_status)::text,
    status_updated_at = now(),
    -- Only an answer from the ledger counts; adopting an orphaned in-flight batch is none.
    unknown_count = CASE WHEN sqlc.arg(dlt_status)::text <> 'UNKNOWN' THEN 0
                         WHEN sqlc.arg(answer)::bool THEN unknown_count + 1
                         ELSE unknown_count END,
    invalid_details = COALESCE(sqlc.narg(invalid_details)::jsonb, invalid_details),
    claimant = sqlc.arg(claimant)::uuid, claim_epoch = sqlc.arg(epoch)::bigint,
    updated_at = now()
WHERE seq = sqlc.arg(seq) AND state = sqlc.arg(expected_state)::text
RETURNING state, EXTRACT(EPOCH FROM now() - created_at)::float8 AS age_seconds;

-- name: TransitionLog :exec
INSERT INTO batch_transitions (seq, from_state, to_state, instance_id, epoch, detail)
VALUES (sqlc.arg(seq), sqlc.narg(from_state), sqlc.arg(to_state), sqlc.arg(instance_id), sqlc.arg(epoch), sqlc.narg(detail));

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
