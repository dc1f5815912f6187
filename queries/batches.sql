-- Batches. Every state change is one conditional UPDATE: on the state the writer expects, and
-- for an owner's writes on its claim (claimant, epoch) as well.

-- name: BatchInsert :one
-- Stores a batch after every batch of its service_id committed before it. Enqueues of one
-- service_id are serialized by a transaction-scoped advisory lock taken before seq is drawn,
-- so seq order is commit order: a transaction that drew a lower seq has committed (or rolled
-- back) before the next one can draw. The lock is held to the end of the caller's transaction
-- (or of this statement alone when it runs outside one).
-- Idempotent on (service_id, batch_id): a batch stored twice keeps its first seq. No row
-- comes back on any conflict, including a ledger batch id stored under another service_id.
-- An empty batch_id is no id: such a job is stored every time (migration 22).
-- The pair is registered in batch_keys by the trigger batches_key, which skips the row when
-- the pair (or a ledger batch id) is already stored. No unique index of batches can refuse a
-- row the trigger lets through (seq is drawn from its sequence, a ledger id is registered in
-- ledger_batch_keys), so the insert has no ON CONFLICT, whose speculative insertion costs a
-- probe of each unique index and a second WAL record per row (as for BatchesInsertMany).
-- The service_id's claim row is created under the same lock, so that an owner dropping the
-- row as idle (ClaimsLockIdle, ClaimsDropIdle) either sees this batch or runs entirely before
-- this statement takes the lock, and then the row is created again here.
-- run_at (a run-at time: the batch is not handed out before it, by the database clock),
-- max_attempts (the job's own attempt limit), kind (package jobs) and timeout_ms (the job's own
-- timeout) are optional.
-- wake_after_commit: the statement is a transaction of its own, and its caller wakes the
-- holder once it committed (BatchesWake); the trigger batches_notify_work leaves it alone.
WITH serial AS (
    SELECT pg_advisory_xact_lock(hashtext('batchclaim.enqueue'), hashtext(sqlc.arg(service_id)::text)) AS locked,
           CASE WHEN sqlc.arg(wake_after_commit)::bool THEN set_config('batchclaim_ingest.wake', 'after_commit', true) END AS wake
),
registered AS (
    INSERT INTO batchclaim.service_id_claims (service_id)
    SELECT sqlc.arg(service_id)::text FROM serial
    ON CONFLICT (service_id) DO NOTHING
)
INSERT INTO batchclaim.batches (service_id, batch_id, payload, ledger, next_attempt_at, max_attempts, kind, timeout_ms)
SELECT sqlc.arg(service_id)::text, sqlc.arg(batch_id)::text, sqlc.arg(payload)::bytea, sqlc.arg(ledger)::bool,
       sqlc.narg(run_at)::timestamptz, sqlc.narg(max_attempts)::int, sqlc.narg(kind)::text, sqlc.narg(timeout_ms)::bigint FROM serial
RETURNING seq, created_at;

-- name: BatchesInsertMany :many
-- Stores many jobs of many service_ids in one statement, after every batch of each service_id
-- committed before it, each service_id's jobs in the order given: BatchInsert for a set.
-- Each service_id's enqueue lock is taken first, in the order of the lock's own key, so that
-- two such statements wait for each other instead of deadlocking (one entry of the server's
-- lock table per service_id, held to the end of the transaction); the claim rows are created
-- under the locks. The rows' seqs are drawn by service_id and, within one, in the order
-- given, and their pairs registered in batch_keys in one insert in that order
-- (batchclaim_register_keys): a pair stored before, or earlier in the list, is skipped and
-- not returned. A job without an id (an empty batch_id) is never a duplicate: its pair is not
-- registered (nor by the trigger, migration 22). The rows whose pair was registered, and the
-- rows without an id, are then inserted in the same order (which
-- draws pos in it). Grouped by service_id, consecutive inserts land on one leaf page of the
-- indexes that lead with it (batch_keys' and the open index), where the order given (keys
-- in turn, say) sends each to another: a tenth less time for 10,000 jobs of 1,000 keys once
-- the tables hold some 100,000 jobs (docs/performance.md). Only a service_id's own jobs need
-- an order between them. batchclaim_keys_registered_through
-- keeps the per-row trigger batches_key from registering them again (migration 20). A ledger
-- list (ledger) leaves the registration to the trigger, which also registers each id across
-- service_ids. No unique index of batches can refuse a row whose pair (and ledger id) is
-- registered, so the insert has no ON CONFLICT, whose speculative insertion would probe each
-- unique index once more per row. A run-at
-- time of year 1 (Go's zero time), an attempt limit of 0, an empty kind and a timeout of 0
-- mean none; an empty array of them, none for every job. wake_after_commit as for
-- BatchInsert.
WITH input AS (
    SELECT unnest(sqlc.arg(service_ids)::text[]) AS service_id, unnest(sqlc.arg(batch_ids)::text[]) AS batch_id,
           unnest(sqlc.arg(payloads)::bytea[]) AS payload,
           NULLIF(unnest(sqlc.arg(run_ats)::timestamptz[]), '0001-01-01 00:00:00+00') AS run_at,
           NULLIF(unnest(sqlc.arg(max_attempts)::int[]), 0) AS max_attempts,
           NULLIF(unnest(sqlc.arg(kinds)::text[]), '') AS kind,
           NULLIF(unnest(sqlc.arg(timeouts_ms)::bigint[]), 0) AS timeout_ms,
           generate_series(1, cardinality(sqlc.arg(service_ids)::text[])) AS ord
),
serial AS (
    SELECT count(pg_advisory_xact_lock(hashtext('batchclaim.enqueue'), k.h)) AS locked,
           CASE WHEN sqlc.arg(wake_after_commit)::bool THEN set_config('batchclaim_ingest.wake', 'after_commit', true) END AS wake
    FROM (SELECT hashtext(service_id) AS h FROM input GROUP BY 1 ORDER BY 1) k
),
registered AS (
    INSERT INTO batchclaim.service_id_claims (service_id)
    SELECT DISTINCT i.service_id FROM input i, serial
    ON CONFLICT (service_id) DO NOTHING
),
numbered AS (
    SELECT i.*, nextval('batchclaim.batches_seq_seq') AS seq FROM input i, serial ORDER BY i.service_id COLLATE "C", i.ord
),
keyed AS (
    SELECT unnest(batchclaim.batchclaim_register_keys(array_agg(n.service_id ORDER BY n.seq), array_agg(n.batch_id ORDER BY n.seq),
                                                      array_agg(n.seq ORDER BY n.seq))) AS seq
    FROM numbered n WHERE NOT sqlc.arg(ledger)::bool AND n.batch_id <> ''
),
marked AS (
    SELECT CASE WHEN sqlc.arg(ledger)::bool THEN 0 ELSE batchclaim.batchclaim_keys_registered_through(max(seq)) END AS through FROM numbered
)
INSERT INTO batchclaim.batches (seq, service_id, batch_id, payload, ledger, next_attempt_at, max_attempts, kind, timeout_ms)
SELECT n.seq, n.service_id, n.batch_id, n.payload, sqlc.arg(ledger)::bool, n.run_at, n.max_attempts, n.kind, n.timeout_ms
FROM numbered n, marked m
WHERE sqlc.arg(ledger)::bool OR m.through IS NOT NULL AND (n.batch_id = '' OR n.seq IN (SELECT k.seq FROM keyed k))
ORDER BY n.seq
RETURNING seq, service_id, batch_id;

-- name: BatchesLookupMany :many
-- Batches by their pairs, through batch_keys: those of a BatchesInsertMany that were stored
-- before.
SELECT k.service_id, k.batch_id, k.seq FROM batchclaim.batch_keys k
JOIN (SELECT unnest(sqlc.arg(service_ids)::text[]) AS service_id, unnest(sqlc.arg(batch_ids)::text[]) AS batch_id) u
  ON k.service_id = u.service_id AND k.batch_id = u.batch_id;

-- name: BatchesWake :exec
-- Wakes the holders of service_ids whose enqueues committed without notifying
-- (wake_after_commit), as batchclaim_notify_work would have at their commit: the holder's own
-- channel with the service_id, or every instance's claim cycle for a service_id nobody holds.
-- Its transaction writes nothing but the notifications, so its commit does not wait for the
-- flush of its record (synchronous_commit off for it alone): Postgres holds the lock that
-- orders notifying commits for no flush, and a notification lost in a crash delays a job
-- until its holder's safety sweep, as one missed while not listening does. The array is read
-- through a sub-select and each claim row by its key (LIMIT 1 keeps the probe from becoming
-- a join), so that Postgres keeps one plan, which never scans the claims table, instead of
-- planning every call (see BatchesTakeHeads).
SELECT count(pg_notify(CASE WHEN c.claimant IS NULL THEN 'batchclaim_free'
                            ELSE 'batchclaim_work_' || replace(c.claimant::text, '-', '') END,
                       CASE WHEN c.claimant IS NULL THEN '' ELSE c.service_id END))
FROM (SELECT set_config('synchronous_commit', 'off', true)) s,
     unnest((SELECT sqlc.arg(service_ids)::text[])) w(service_id)
CROSS JOIN LATERAL (
    SELECT c.service_id, c.claimant FROM batchclaim.service_id_claims c WHERE c.service_id = w.service_id LIMIT 1
) c;

-- name: BatchLedgerOwner :one
-- The service_id a ledger batch id is stored under.
SELECT service_id, seq FROM batchclaim.batches WHERE batch_id = sqlc.arg(batch_id) AND ledger;

-- name: BatchBySeq :one
SELECT seq, service_id, batch_id, state, created_at FROM batchclaim.batches WHERE seq = sqlc.arg(seq);

-- name: BatchLookup :one
-- A batch by its pair, through batch_keys (the pair is not indexed on batches).
SELECT b.seq, b.state, b.created_at FROM batchclaim.batch_keys k
JOIN batchclaim.batches b ON b.seq = k.seq
WHERE k.service_id = sqlc.arg(service_id) AND k.batch_id = sqlc.arg(batch_id);

-- name: BatchesTakeHeads :many
-- The oldest unfinished batch of each given service_id (one index probe each), with what
-- the queuer needs to decide whether it can go now, judged by the database clock; and, in the
-- same statement, the in-flight mark of the heads that are NEW and due (the common case: a
-- job enqueued and not yet run), so that a job starts one statement after its wake-up.
-- Those are marked in the order given, up to max_jobs of them and max_bytes of payload in all
-- (the first of any size with any_size: the workers hold none), each only if its claim is
-- held with the given epoch while the lease is in phase one by the database clock, as
-- BatchesMarkInflight marks (fenced; a change there is made here too). The other heads
-- (DELAYED, UNKNOWN, left in flight, a run-at time ahead, past the budget) are returned
-- unmarked for the queuer to decide on, and BatchesMarkInflight marks those that go.
-- wanted says a head was to be marked; fenced, whether its claim held; marked, whether it
-- was, and then payload and the rest are the mark's.
-- With skip_valid, VALID batches count as done for ordering (adapters whose VALID fixes
-- order). floors (one per service_id, 0 for none) is a pos no unfinished batch of the
-- service_id is below: the pos of a head read before, since nothing ever takes a place before
-- an unfinished batch (BatchRetry). The probe starts there, instead of at the service_id's
-- first entry of the open index: the entries of batches that finished stay there until vacuum
-- removes them, which it cannot while a snapshot older than their finish is held open, and
-- each costs a heap visit. Not used with skip_valid, whose VALID batches stay unfinished
-- behind the head.
-- The arrays are read through sub-selects, and the halt is probed per service_id (OFFSET 0
-- keeps that probe from becoming a join): a plan for given arrays then looks no cheaper than
-- the generic one, so Postgres keeps one plan instead of planning every call (a call for one
-- service_id, the common one, cost about three times as much, planned); the generic plan
-- looks up each service_id's halt on its own, not by a join that reads every halt per call,
-- and only while some service_id is halted (none is, as a rule).
-- The mark finds each head by the tuple id (ctid) its probe read in this statement's snapshot,
-- not by a second descent of the primary key. A head updated meanwhile (a cancel, a new run-at
-- time) no longer has that id: it is left unmarked (fenced, not marked), and the queuer looks
-- at its service_id again.
WITH heads AS (
    SELECT h.tid, h.seq, h.service_id, h.batch_id, h.state, h.attempts, h.claim_epoch, h.claimant, h.pos,
           h.unknown_count, h.size, s.epoch AS want_epoch, s.n,
           (h.next_attempt_at IS NULL OR h.next_attempt_at <= now()) AS due,
           -- How long until a DELAYED head, or a NEW one with a run-at time, is due (0 when it is).
           GREATEST(COALESCE(EXTRACT(EPOCH FROM h.next_attempt_at - now()), 0), 0)::float8 AS due_in_seconds,
           -- The UNKNOWN grace runs from when the batch became UNKNOWN (its POST's outcome, or its
           -- adoption from a previous owner), not from the last status answer (every poll writes one).
           EXTRACT(EPOCH FROM now() - COALESCE(h.unknown_since, h.submitted_at, h.created_at))::float8 AS unknown_seconds
    FROM (SELECT unnest((SELECT sqlc.arg(service_ids)::text[])) AS service_id, unnest((SELECT sqlc.arg(floors)::bigint[])) AS floor,
                 unnest((SELECT sqlc.arg(epochs)::bigint[])) AS epoch,
                 generate_series(1, cardinality((SELECT sqlc.arg(service_ids)::text[]))) AS n) s
    CROSS JOIN LATERAL (
        SELECT (b.ctid)::tid AS tid, b.seq, b.service_id, b.batch_id, b.state, b.attempts, b.claim_epoch, b.claimant, b.pos,
               b.unknown_count, b.unknown_since, b.submitted_at, b.created_at, b.next_attempt_at,
               octet_length(b.payload)::bigint AS size
        FROM batchclaim.batches b
        WHERE b.service_id = s.service_id
          AND b.pos >= s.floor
          AND b.unfinished
          AND NOT (sqlc.arg(skip_valid)::bool AND b.state = 'VALID')
        ORDER BY b.pos
        LIMIT 1
    ) h
    WHERE NOT (SELECT EXISTS (SELECT 1 FROM batchclaim.service_halts))
       OR NOT EXISTS (SELECT 1 FROM batchclaim.service_halts x WHERE x.service_id = s.service_id OFFSET 0)
),
want AS (
    SELECT r.tid, r.seq, r.service_id, r.epoch FROM (
        SELECT h.tid, h.seq, h.service_id, h.want_epoch AS epoch,
               row_number() OVER (ORDER BY h.n) AS rn, sum(h.size) OVER (ORDER BY h.n) AS bytes
        FROM heads h
        WHERE h.state = 'NEW' AND h.due
    ) r
    WHERE r.rn <= sqlc.arg(max_jobs)::int
      AND (r.bytes <= sqlc.arg(max_bytes)::bigint OR r.rn = 1 AND sqlc.arg(any_size)::bool)
),
lease AS (
    SELECT i.id FROM batchclaim.instances i
    WHERE i.id = sqlc.arg(claimant)::uuid AND i.nonce = sqlc.arg(nonce)::uuid
      AND i.expiry_1 > COALESCE(sqlc.narg(now)::timestamptz, now())
),
-- The planner cannot know how many heads are wanted, and takes it for one: every step below
-- goes from one CTE to a table by key, and the final select finds a head in want and
-- fenced by a hashed IN, so that no step loops over one CTE for each row of another (which
-- cost 60 ms for 256 heads).
fenced AS (
    SELECT w.tid, w.seq, c.service_id, c.epoch
    FROM (SELECT w.tid, w.seq, w.service_id, w.epoch FROM want w ORDER BY w.service_id) w
    CROSS JOIN LATERAL (
        SELECT c.service_id, c.epoch FROM batchclaim.service_id_claims c
        WHERE c.service_id = w.service_id AND c.epoch = w.epoch AND (c.claimant = (SELECT id FROM lease)) IS TRUE
        LIMIT 1
        FOR SHARE OF c
    ) c
),
-- The mark's time is read once, after the statement's snapshot was taken (clock_timestamp()),
-- not at its transaction's start (now()): the snapshot is taken after the statement is
-- planned, so a head that became the head by a commit just before it (its predecessor's
-- outcome, a poll's COMMITTED) would otherwise carry a mark older than that commit's time,
-- and the record would show two batches of one service_id in flight at once.
stamp AS MATERIALIZED (
    SELECT clock_timestamp() AS at
),
marked AS (
    UPDATE batchclaim.batches b
    SET state = 'INFLIGHT', attempts = b.attempts + 1, claimant = sqlc.arg(claimant)::uuid,
        claim_epoch = f.epoch, submitted_at = (SELECT s.at FROM stamp s), updated_at = (SELECT s.at FROM stamp s),
        next_attempt_at = NULL, unknown_count = 0, unknown_since = NULL,
        attempt_reason = 'first', attempt_from = 'NEW', attempt_xid = pg_current_xact_id()
    FROM fenced f
    WHERE b.ctid = f.tid AND b.seq = f.seq AND b.service_id = f.service_id AND b.state = 'NEW'
    RETURNING b.seq, b.payload, b.attempts, b.max_attempts, b.attempt_base, b.kind, b.timeout_ms
)
SELECT h.seq, h.service_id, h.batch_id, h.state, h.attempts, h.claim_epoch, h.claimant, h.pos,
       h.unknown_count, h.size, h.due::bool AS due, h.due_in_seconds, h.unknown_seconds,
       (h.seq IN (SELECT w.seq FROM want w))::bool AS wanted, (h.seq IN (SELECT f.seq FROM fenced f))::bool AS fenced,
       (m.seq IS NOT NULL)::bool AS marked,
       COALESCE(m.payload, ''::bytea)::bytea AS payload, COALESCE(m.attempts, 0)::int AS marked_attempts,
       COALESCE(m.max_attempts, 0)::int AS max_attempts, COALESCE(m.attempt_base, 0)::int AS attempt_base,
       COALESCE(m.kind, '')::text AS kind, COALESCE(m.timeout_ms, 0)::bigint AS timeout_ms
FROM heads h
LEFT JOIN marked m ON m.seq = h.seq
ORDER BY h.n;

-- The data path writes sets: one statement marks every batch a round hands out, one records
-- every outcome that arrived (and marks the next batch of each service_id it frees), one
-- records a poll's answers. Each is fenced per row: a row whose claim is no longer held with
-- its epoch (or whose registry row is not this process's) is left alone and reported for that
-- row alone; the others go ahead. A switch that leaves a part out (track_idle) is read from a
-- row of a CTE, not tested as a parameter: a custom plan would fold the part away and look
-- cheaper than the generic one, and Postgres would then plan these statements at every
-- execution instead of keeping one plan. Each writes its log rows in the same statement: a
-- POST's mark and outcome are its submission_attempts row (from_state, to_state), written once with
-- the outcome (until then the mark's reason and from-state wait on the batch row, in
-- attempt_reason and attempt_from; an outcome that commits the batch leaves them there for
-- good and writes no row); the adoption of a batch whose outcome nobody recorded
-- writes that lost attempt's row; other changes (a poll's answers, adoptions) are rows of
-- batch_transitions; batch_history shows all of them. The claim rows are locked FOR SHARE in
-- service_id order and never written on the way: a takeover (which locks a claim row FOR UPDATE, skipping locked ones, and then judges it
-- with a snapshot taken after the lock) cannot commit in between, and these statements never
-- wait for one another. Each claim row is probed by its key (a LATERAL LIMIT 1 the planner
-- cannot turn into a join, with the claimant compared in a form no index answers, IS TRUE):
-- as a join, a generic plan on tables never analyzed read every claim the instance holds
-- through the claimant index at each call, most of an outcome's cost at one row a call; and
-- statistics taken while the claims were free would send a probe down the claimant index.
-- The arrays are read through sub-selects, so that a plan for one row looks no cheaper than
-- the generic one (see BatchesTakeHeads). Whether a claim is busy (has a POST in flight) is read from its head
-- batch, not stored on the claim.

-- name: BatchesMarkInflight :many
-- Marks the given heads in flight before their POSTs, each only if its claim is held with its
-- epoch while the lease is in phase one by the database clock (fenced), and the batch is still
-- in the state it was handed out in (marked; a head that moved on meanwhile is skipped, its
-- claim untouched). A POST starts the count of UNKNOWN answers afresh. Returns, per head,
-- whether its claim held, whether it was marked, and for the heads marked their payload,
-- attempt number, own attempt limit (0: none), the attempts made before its last retry, kind
-- ('': none) and own timeout (0: none). The attempt's reason and from-state are kept
-- on the batch row for the attempt log's row, which the outcome writes.
WITH want AS (
    SELECT unnest((SELECT sqlc.arg(seqs)::bigint[])) AS seq,
           unnest((SELECT sqlc.arg(service_ids)::text[])) AS service_id,
           unnest((SELECT sqlc.arg(epochs)::bigint[])) AS epoch,
           unnest((SELECT sqlc.arg(from_states)::text[])) AS from_state,
           unnest((SELECT sqlc.arg(reasons)::text[])) AS reason
),
lease AS (
    SELECT i.id FROM batchclaim.instances i
    WHERE i.id = sqlc.arg(claimant)::uuid AND i.nonce = sqlc.arg(nonce)::uuid
      AND i.expiry_1 > COALESCE(sqlc.narg(now)::timestamptz, now())
),
fenced AS (
    SELECT c.service_id, c.epoch
    FROM (SELECT DISTINCT w.service_id, w.epoch FROM want w ORDER BY w.service_id, w.epoch) w
    CROSS JOIN LATERAL (
        SELECT c.service_id, c.epoch FROM batchclaim.service_id_claims c
        WHERE c.service_id = w.service_id AND c.epoch = w.epoch AND (c.claimant = (SELECT id FROM lease)) IS TRUE
        LIMIT 1
        FOR SHARE OF c
    ) c
),
marked AS (
    UPDATE batchclaim.batches b
    SET state = 'INFLIGHT', attempts = b.attempts + 1, claimant = sqlc.arg(claimant)::uuid,
        claim_epoch = w.epoch, submitted_at = now(), updated_at = now(),
        next_attempt_at = NULL, unknown_count = 0, unknown_since = NULL,
        attempt_reason = w.reason, attempt_from = w.from_state, attempt_xid = pg_current_xact_id()
    FROM want w JOIN fenced f ON f.service_id = w.service_id AND f.epoch = w.epoch
    WHERE b.seq = w.seq AND b.service_id = w.service_id AND b.state = w.from_state
    RETURNING b.seq, b.payload, b.attempts, b.max_attempts, b.attempt_base, b.kind, b.timeout_ms
)
SELECT w.seq::bigint AS seq, (f.service_id IS NOT NULL)::bool AS fenced, (m.seq IS NOT NULL)::bool AS marked,
       COALESCE(m.payload, ''::bytea)::bytea AS payload, COALESCE(m.attempts, 0)::int AS attempts,
       COALESCE(m.max_attempts, 0)::int AS max_attempts, COALESCE(m.attempt_base, 0)::int AS attempt_base,
       COALESCE(m.kind, '')::text AS kind, COALESCE(m.timeout_ms, 0)::bigint AS timeout_ms
FROM want w
LEFT JOIN fenced f ON f.service_id = w.service_id AND f.epoch = w.epoch
LEFT JOIN marked m ON m.seq = w.seq;

-- name: BatchesRecordOutcomes :many
-- Records the outcomes of POSTs marked in flight by this instance, each fenced on its claim and
-- on its attempt: the batch must still be INFLIGHT under this claimant, epoch and attempt
-- number, so a late outcome of an earlier attempt (one that was adopted and posted again) is
-- not recorded over the later one. An empty text or a zero number means none (an empty output
-- keeps the output an earlier attempt recorded). A new outcome
-- starts the count of UNKNOWN answers afresh, and an UNKNOWN one the resubmission grace. Each
-- outcome recorded writes its attempt's row of the attempt log, whole: started when the batch
-- was marked (submitted_at), for the reason and from the state the mark kept on the batch row;
-- except an outcome that commits its batch (COMMITTED is final): the batch row keeps that
-- attempt, with its HTTP status and duration, and batch_history shows it from there.
--
-- A cancel requested for the attempt (BatchCancel) turns an outcome that leaves the batch to
-- be run again or given up (DELAYED, INVALID, DISCARDED) into CANCELLED, with the request's
-- reason as the last error; COMMITTED, PENDING and UNKNOWN stand (the job took effect, or may
-- still). The request is read from the row the update locks, so a cancel that commits while
-- this statement waits for the row is seen. A snoozed attempt (outcome 'snooze', DELAYED)
-- raises attempt_base: it does not count towards the attempt limit or the backoff. new_state
-- is the state written. drained says the outcome finished its batch and the statement saw no
-- other unfinished batch of its service_id (never with skip_valid): the queuer need not read
-- the service_id's head again until more work arrives, whose enqueue wakes it.
--
-- When chain is set for an outcome that frees its service_id (COMMITTED, DISCARDED, CANCELLED, or INVALID
-- without halt_on_invalid) and the lease is in phase one, the service_id's next batch, if it is
-- NEW and due (no run-at time ahead) and its payload is at most chain_max_bytes long (negative: any), is marked in flight in the same
-- statement and returned (next_*), so that the worker that
-- finished one batch starts the next without another statement. With track_idle, a
-- service_id left without unfinished batches gets active_at = now() (the idle clock of
-- claims.Config.DropIdleAfter).
--
-- BatchesRecordCommits below writes a group of successes the same way: a change here is made
-- there too (TestCommitsWriteWhatOutcomesWrite compares the two).
WITH o AS (
    SELECT unnest((SELECT sqlc.arg(seqs)::bigint[])) AS seq,
           unnest((SELECT sqlc.arg(service_ids)::text[])) AS service_id,
           unnest((SELECT sqlc.arg(epochs)::bigint[])) AS epoch,
           unnest((SELECT sqlc.arg(attempts)::int[])) AS attempt,
           unnest((SELECT sqlc.arg(new_states)::text[])) AS new_state,
           unnest((SELECT sqlc.arg(dlt_statuses)::text[])) AS dlt_status,
           unnest((SELECT sqlc.arg(retry_after_ms)::bigint[])) AS retry_after_ms,
           unnest((SELECT sqlc.arg(last_errors)::text[])) AS last_error,
           unnest((SELECT sqlc.arg(invalid_details)::text[])) AS invalid,
           unnest((SELECT sqlc.arg(http_statuses)::int[])) AS http_status,
           unnest((SELECT sqlc.arg(latencies_ms)::float8[])) AS latency_ms,
           unnest((SELECT sqlc.arg(outcomes)::text[])) AS outcome,
           unnest((SELECT sqlc.arg(chain)::bool[])) AS chain,
           unnest((SELECT sqlc.arg(chain_max_bytes)::bigint[])) AS chain_max_bytes,
           unnest((SELECT sqlc.arg(outputs)::text[])) AS output
),
fenced AS (
    SELECT c.service_id, c.epoch
    FROM (SELECT DISTINCT o.service_id, o.epoch FROM o ORDER BY o.service_id, o.epoch) w
    CROSS JOIN LATERAL (
        SELECT c.service_id, c.epoch FROM batchclaim.service_id_claims c
        WHERE c.service_id = w.service_id AND c.epoch = w.epoch AND (c.claimant = sqlc.arg(claimant)::uuid) IS TRUE
        LIMIT 1
        FOR SHARE OF c
    ) c
    WHERE EXISTS (SELECT 1 FROM batchclaim.instances i WHERE i.id = sqlc.arg(claimant)::uuid AND i.nonce = sqlc.arg(nonce)::uuid)
),
recorded AS (
    UPDATE batchclaim.batches b
    SET state = CASE WHEN b.cancel_attempt = b.attempts AND o.new_state IN ('DELAYED', 'INVALID', 'DISCARDED')
                     THEN 'CANCELLED' ELSE o.new_state END,
        dlt_status = COALESCE(NULLIF(o.dlt_status, ''), b.dlt_status),
        status_updated_at = now(),
        next_attempt_at = now() + o.retry_after_ms * interval '1 millisecond',
        last_error = CASE WHEN b.cancel_attempt = b.attempts AND o.new_state IN ('DELAYED', 'INVALID', 'DISCARDED')
                          THEN b.cancel_reason ELSE NULLIF(o.last_error, '') END,
        invalid_details = COALESCE(NULLIF(o.invalid, '')::jsonb, b.invalid_details),
        unknown_count = 0,
        unknown_since = CASE WHEN o.new_state = 'UNKNOWN' THEN now() END,
        finished_at = CASE WHEN o.new_state IN ('COMMITTED', 'INVALID', 'DISCARDED', 'CANCELLED')
                             OR b.cancel_attempt = b.attempts AND o.new_state = 'DELAYED' THEN now() END,
        -- As finished_at (migration 21): the trigger batches_finished_at then has nothing to do.
        unfinished = CASE WHEN o.new_state IN ('COMMITTED', 'INVALID', 'DISCARDED', 'CANCELLED')
                            OR b.cancel_attempt = b.attempts AND o.new_state = 'DELAYED' THEN false ELSE true END,
        -- A snoozed attempt does not count: the attempt limit and the backoff count from
        -- attempt_base, so it goes up with it (attempts itself never goes down).
        attempt_base = b.attempt_base + CASE WHEN o.outcome = 'snooze' THEN 1 ELSE 0 END,
        attempt_http_status = CASE WHEN o.new_state = 'COMMITTED' THEN NULLIF(o.http_status, 0) END,
        attempt_latency_ms = CASE WHEN o.new_state = 'COMMITTED' THEN o.latency_ms END,
        output = COALESCE(NULLIF(o.output, '')::jsonb, b.output),
        updated_at = now()
    FROM o JOIN fenced f ON f.service_id = o.service_id AND f.epoch = o.epoch
    WHERE b.seq = o.seq AND b.service_id = o.service_id AND b.state = 'INFLIGHT'
      AND b.claimant = sqlc.arg(claimant)::uuid AND b.claim_epoch = o.epoch AND b.attempts = o.attempt
    -- What the CTEs below need comes from here, so that none of them joins o with recorded
    -- (the planner cannot know how many rows recorded returns, and would loop over both).
    RETURNING b.seq, b.service_id, b.batch_id, b.pos, b.submitted_at, b.attempt_reason, b.attempt_from, o.epoch, b.state AS new_state,
              o.chain, o.chain_max_bytes, o.http_status, o.latency_ms, o.outcome, o.last_error,
              EXTRACT(EPOCH FROM now() - b.created_at)::float8 AS age_seconds
),
attempted AS (
    INSERT INTO batchclaim.submission_attempts (seq, service_id, batch_id, instance_id, epoch, reason, from_state,
        started_at, finished_at, http_status, latency_ms, outcome, error, to_state)
    SELECT r.seq, r.service_id, r.batch_id, sqlc.arg(claimant)::uuid, r.epoch, r.attempt_reason, r.attempt_from,
           r.submitted_at, now(), NULLIF(r.http_status, 0), r.latency_ms, r.outcome, NULLIF(r.last_error, ''), r.new_state
    FROM recorded r
    WHERE r.new_state <> 'COMMITTED'
),
halted AS (
    INSERT INTO batchclaim.service_halts (service_id, seq, reason)
    SELECT r.service_id, r.seq, 'batch INVALID: ' || r.last_error
    FROM recorded r
    WHERE sqlc.arg(halt_on_invalid)::bool AND r.new_state = 'INVALID'
    ON CONFLICT (service_id) DO NOTHING
),
finished AS (
    -- floor: every other unfinished batch of the service_id comes after this one, which was
    -- its head (the batch in flight is), so a probe for the next starts past it and reads
    -- none of the finished batches' index entries vacuum has not removed (BatchesTakeHeads). Not
    -- with skip_valid: VALID batches before the head are unfinished.
    SELECT r.seq, r.service_id, CASE WHEN sqlc.arg(skip_valid)::bool THEN 0 ELSE r.pos END AS floor,
           r.epoch, r.chain, r.chain_max_bytes,
           (r.new_state <> 'INVALID' OR NOT sqlc.arg(halt_on_invalid)::bool) AS frees,
           sqlc.arg(track_idle)::bool AS track_idle
    FROM recorded r
    WHERE r.new_state IN ('COMMITTED', 'INVALID', 'DISCARDED', 'CANCELLED')
),
lease AS (
    SELECT i.id FROM batchclaim.instances i
    WHERE i.id = sqlc.arg(claimant)::uuid AND i.nonce = sqlc.arg(nonce)::uuid
      AND i.expiry_1 > COALESCE(sqlc.narg(now)::timestamptz, now())
),
-- The next unfinished batch of each service_id an outcome finished (one probe from its
-- floor), or none: the batch a chain goes on with, and whether the service_id is left
-- without work (drained). The chain marks it by the tuple id the probe read, as
-- BatchesTakeHeads marks its heads: a batch updated meanwhile is not chained, and its
-- service_id goes back to the queuer. The halt is probed only while some service_id is
-- halted.
after AS (
    SELECT f.seq AS prev_seq, f.service_id, f.epoch, f.floor, f.chain, f.chain_max_bytes, f.frees, f.track_idle,
           n.tid, n.seq, n.state, n.next_attempt_at, n.size
    FROM finished f
    LEFT JOIN LATERAL (
        SELECT (b.ctid)::tid AS tid, b.seq, b.state, b.next_attempt_at, octet_length(b.payload) AS size FROM batchclaim.batches b
        WHERE b.service_id = f.service_id AND b.pos > f.floor AND b.unfinished AND b.seq <> f.seq
          AND NOT (sqlc.arg(skip_valid)::bool AND b.state = 'VALID')
        ORDER BY b.pos
        LIMIT 1
    ) n ON true
),
next_head AS (
    SELECT a.prev_seq, a.tid, a.seq, a.service_id, a.epoch
    FROM after a
    WHERE a.chain AND a.frees AND a.state = 'NEW' AND (a.next_attempt_at IS NULL OR a.next_attempt_at <= now())
      AND EXISTS (SELECT 1 FROM lease)
      AND (a.chain_max_bytes < 0 OR a.size <= a.chain_max_bytes)
      AND (NOT (SELECT EXISTS (SELECT 1 FROM batchclaim.service_halts)) OR NOT EXISTS (SELECT 1 FROM batchclaim.service_halts x WHERE x.service_id = a.service_id))
),
chained AS (
    UPDATE batchclaim.batches b
    SET state = 'INFLIGHT', attempts = b.attempts + 1, claimant = sqlc.arg(claimant)::uuid,
        claim_epoch = n.epoch, submitted_at = now(), updated_at = now(),
        next_attempt_at = NULL, unknown_count = 0, unknown_since = NULL,
        attempt_reason = 'first', attempt_from = 'NEW', attempt_xid = pg_current_xact_id()
    FROM next_head n
    WHERE b.ctid = n.tid AND b.seq = n.seq AND b.service_id = n.service_id AND b.state = 'NEW'
    RETURNING b.seq, b.batch_id, b.payload, b.attempts, b.max_attempts, b.attempt_base, b.kind, b.timeout_ms, n.prev_seq
),
-- With skip_valid the probe above passes over VALID batches, which are unfinished: only a
-- service_id without them is drained.
drained AS (
    UPDATE batchclaim.service_id_claims c
    SET active_at = now()
    FROM after a
    WHERE a.track_idle AND a.seq IS NULL
      AND c.service_id = a.service_id AND c.epoch = a.epoch AND (c.claimant = sqlc.arg(claimant)::uuid) IS TRUE
      AND NOT (sqlc.arg(skip_valid)::bool AND EXISTS (SELECT 1 FROM batchclaim.batches b
          WHERE b.service_id = a.service_id AND b.pos > a.floor AND b.unfinished AND b.seq <> a.prev_seq))
)
SELECT o.seq::bigint AS seq, (f.service_id IS NOT NULL)::bool AS fenced, (r.seq IS NOT NULL)::bool AS recorded,
       COALESCE(r.new_state, '')::text AS new_state, COALESCE(r.age_seconds, 0)::float8 AS age_seconds,
       (a.prev_seq IS NOT NULL AND a.seq IS NULL AND NOT sqlc.arg(skip_valid)::bool)::bool AS drained,
       COALESCE(c.seq, 0)::bigint AS next_seq, COALESCE(c.batch_id, '')::text AS next_batch_id,
       COALESCE(c.payload, ''::bytea)::bytea AS next_payload, COALESCE(c.attempts, 0)::int AS next_attempts,
       COALESCE(c.max_attempts, 0)::int AS next_max_attempts, COALESCE(c.attempt_base, 0)::int AS next_attempt_base,
       COALESCE(c.kind, '')::text AS next_kind, COALESCE(c.timeout_ms, 0)::bigint AS next_timeout_ms
FROM o
LEFT JOIN fenced f ON f.service_id = o.service_id AND f.epoch = o.epoch
LEFT JOIN recorded r ON r.seq = o.seq
LEFT JOIN after a ON a.prev_seq = o.seq
LEFT JOIN chained c ON c.prev_seq = o.seq;

-- name: BatchesRecordCommits :many
-- BatchesRecordOutcomes for a group whose every outcome commits its batch, with track_idle
-- off: the same rows written, without the CTEs that such a group never writes through (the
-- attempt log's row, the halt, the idle clock). Each writing CTE costs its start-up at every
-- execution whether it writes or not, and a run of successes is the common case. A change
-- to BatchesRecordOutcomes is made here too (TestCommitsWriteWhatOutcomesWrite compares them).
WITH o AS (
    SELECT unnest((SELECT sqlc.arg(seqs)::bigint[])) AS seq,
           unnest((SELECT sqlc.arg(service_ids)::text[])) AS service_id,
           unnest((SELECT sqlc.arg(epochs)::bigint[])) AS epoch,
           unnest((SELECT sqlc.arg(attempts)::int[])) AS attempt,
           unnest((SELECT sqlc.arg(retry_after_ms)::bigint[])) AS retry_after_ms,
           unnest((SELECT sqlc.arg(http_statuses)::int[])) AS http_status,
           unnest((SELECT sqlc.arg(latencies_ms)::float8[])) AS latency_ms,
           unnest((SELECT sqlc.arg(chain)::bool[])) AS chain,
           unnest((SELECT sqlc.arg(chain_max_bytes)::bigint[])) AS chain_max_bytes,
           unnest((SELECT sqlc.arg(outputs)::text[])) AS output
),
fenced AS (
    SELECT c.service_id, c.epoch
    FROM (SELECT DISTINCT o.service_id, o.epoch FROM o ORDER BY o.service_id, o.epoch) w
    CROSS JOIN LATERAL (
        SELECT c.service_id, c.epoch FROM batchclaim.service_id_claims c
        WHERE c.service_id = w.service_id AND c.epoch = w.epoch AND (c.claimant = sqlc.arg(claimant)::uuid) IS TRUE
        LIMIT 1
        FOR SHARE OF c
    ) c
    WHERE EXISTS (SELECT 1 FROM batchclaim.instances i WHERE i.id = sqlc.arg(claimant)::uuid AND i.nonce = sqlc.arg(nonce)::uuid)
),
recorded AS (
    UPDATE batchclaim.batches b
    SET state = 'COMMITTED', dlt_status = 'COMMITTED', status_updated_at = now(),
        next_attempt_at = now() + o.retry_after_ms * interval '1 millisecond',
        last_error = NULL, unknown_count = 0, unknown_since = NULL, finished_at = now(), unfinished = false,
        attempt_http_status = NULLIF(o.http_status, 0), attempt_latency_ms = o.latency_ms,
        output = COALESCE(NULLIF(o.output, '')::jsonb, b.output), updated_at = now()
    FROM o JOIN fenced f ON f.service_id = o.service_id AND f.epoch = o.epoch
    WHERE b.seq = o.seq AND b.service_id = o.service_id AND b.state = 'INFLIGHT'
      AND b.claimant = sqlc.arg(claimant)::uuid AND b.claim_epoch = o.epoch AND b.attempts = o.attempt
    RETURNING b.seq, b.service_id, o.epoch, o.chain, o.chain_max_bytes,
              -- floor: as in BatchesRecordOutcomes' finished
              CASE WHEN sqlc.arg(skip_valid)::bool THEN 0 ELSE b.pos END AS floor,
              EXTRACT(EPOCH FROM now() - b.created_at)::float8 AS age_seconds
),
lease AS (
    SELECT i.id FROM batchclaim.instances i
    WHERE i.id = sqlc.arg(claimant)::uuid AND i.nonce = sqlc.arg(nonce)::uuid
      AND i.expiry_1 > COALESCE(sqlc.narg(now)::timestamptz, now())
),
-- As in BatchesRecordOutcomes: the next unfinished batch of each service_id, or none.
after AS (
    SELECT f.seq AS prev_seq, f.service_id, f.epoch, f.chain, f.chain_max_bytes,
           n.tid, n.seq, n.state, n.next_attempt_at, n.size
    FROM recorded f
    LEFT JOIN LATERAL (
        SELECT (b.ctid)::tid AS tid, b.seq, b.state, b.next_attempt_at, octet_length(b.payload) AS size FROM batchclaim.batches b
        WHERE b.service_id = f.service_id AND b.pos > f.floor AND b.unfinished AND b.seq <> f.seq
          AND NOT (sqlc.arg(skip_valid)::bool AND b.state = 'VALID')
        ORDER BY b.pos
        LIMIT 1
    ) n ON true
),
next_head AS (
    SELECT a.prev_seq, a.tid, a.seq, a.service_id, a.epoch
    FROM after a
    WHERE a.chain AND a.state = 'NEW' AND (a.next_attempt_at IS NULL OR a.next_attempt_at <= now())
      AND EXISTS (SELECT 1 FROM lease)
      AND (a.chain_max_bytes < 0 OR a.size <= a.chain_max_bytes)
      AND (NOT (SELECT EXISTS (SELECT 1 FROM batchclaim.service_halts)) OR NOT EXISTS (SELECT 1 FROM batchclaim.service_halts x WHERE x.service_id = a.service_id))
),
chained AS (
    UPDATE batchclaim.batches b
    SET state = 'INFLIGHT', attempts = b.attempts + 1, claimant = sqlc.arg(claimant)::uuid,
        claim_epoch = n.epoch, submitted_at = now(), updated_at = now(),
        next_attempt_at = NULL, unknown_count = 0, unknown_since = NULL,
        attempt_reason = 'first', attempt_from = 'NEW', attempt_xid = pg_current_xact_id()
    FROM next_head n
    WHERE b.ctid = n.tid AND b.seq = n.seq AND b.service_id = n.service_id AND b.state = 'NEW'
    RETURNING b.seq, b.batch_id, b.payload, b.attempts, b.max_attempts, b.attempt_base, b.kind, b.timeout_ms, n.prev_seq
)
SELECT o.seq::bigint AS seq, (f.service_id IS NOT NULL)::bool AS fenced, (r.seq IS NOT NULL)::bool AS recorded,
       (CASE WHEN r.seq IS NOT NULL THEN 'COMMITTED' ELSE '' END)::text AS new_state, COALESCE(r.age_seconds, 0)::float8 AS age_seconds,
       (a.prev_seq IS NOT NULL AND a.seq IS NULL AND NOT sqlc.arg(skip_valid)::bool)::bool AS drained,
       COALESCE(c.seq, 0)::bigint AS next_seq, COALESCE(c.batch_id, '')::text AS next_batch_id,
       COALESCE(c.payload, ''::bytea)::bytea AS next_payload, COALESCE(c.attempts, 0)::int AS next_attempts,
       COALESCE(c.max_attempts, 0)::int AS next_max_attempts, COALESCE(c.attempt_base, 0)::int AS next_attempt_base,
       COALESCE(c.kind, '')::text AS next_kind, COALESCE(c.timeout_ms, 0)::bigint AS next_timeout_ms
FROM o
LEFT JOIN fenced f ON f.service_id = o.service_id AND f.epoch = o.epoch
LEFT JOIN recorded r ON r.seq = o.seq
LEFT JOIN after a ON a.prev_seq = o.seq
LEFT JOIN chained c ON c.prev_seq = o.seq;

-- name: BatchesRecordStatuses :many
-- Records what the ledger said about batches of claimed service_ids (or the adoption of a
-- batch left in flight by a previous owner or by this instance before it was fenced), each
-- fenced on its claim and each only if the batch is still in the state and at the attempt it was
-- asked about in. Only an answer from the ledger counts towards the consecutive UNKNOWN
-- answers; an adoption does not, and starts the resubmission grace afresh, so that the ledger
-- is asked before the batch is sent again. The adoption of a batch left in flight writes the
-- attempt log's row of that POST, whose outcome nobody recorded, from what its mark kept on
-- the batch row (the previous release's marks wrote the row themselves: it is not written
-- twice). With track_idle, a service_id left without unfinished batches gets
-- active_at = now(). Callers leave out answers that change nothing, so a poll that learns
-- nothing writes nothing.
WITH u AS (
    SELECT unnest((SELECT sqlc.arg(seqs)::bigint[])) AS seq,
           unnest((SELECT sqlc.arg(service_ids)::text[])) AS service_id,
           unnest((SELECT sqlc.arg(epochs)::bigint[])) AS epoch,
           unnest((SELECT sqlc.arg(attempts)::int[])) AS attempt,
           unnest((SELECT sqlc.arg(from_states)::text[])) AS from_state,
           unnest((SELECT sqlc.arg(new_states)::text[])) AS new_state,
           unnest((SELECT sqlc.arg(dlt_statuses)::text[])) AS dlt_status,
           unnest((SELECT sqlc.arg(answers)::bool[])) AS answer,
           unnest((SELECT sqlc.arg(invalid_details)::text[])) AS invalid,
           unnest((SELECT sqlc.arg(details)::text[])) AS detail
),
fenced AS (
    SELECT c.service_id, c.epoch
    FROM (SELECT DISTINCT u.service_id, u.epoch FROM u ORDER BY u.service_id, u.epoch) w
    CROSS JOIN LATERAL (
        SELECT c.service_id, c.epoch FROM batchclaim.service_id_claims c
        WHERE c.service_id = w.service_id AND c.epoch = w.epoch AND (c.claimant = sqlc.arg(claimant)::uuid) IS TRUE
        LIMIT 1
        FOR SHARE OF c
    ) c
    WHERE EXISTS (SELECT 1 FROM batchclaim.instances i WHERE i.id = sqlc.arg(claimant)::uuid AND i.nonce = sqlc.arg(nonce)::uuid)
),
recorded AS (
    UPDATE batchclaim.batches b
    SET state = u.new_state,
        dlt_status = u.dlt_status,
        status_updated_at = now(),
        unknown_count = CASE WHEN u.dlt_status <> 'UNKNOWN' THEN 0
                             WHEN u.answer THEN b.unknown_count + 1
                             ELSE b.unknown_count END,
        unknown_since = CASE WHEN u.new_state <> 'UNKNOWN' THEN NULL
                             WHEN b.state = 'UNKNOWN' AND u.answer THEN b.unknown_since
                             ELSE now() END,
        finished_at = CASE WHEN u.new_state IN ('COMMITTED', 'INVALID', 'DISCARDED', 'CANCELLED') THEN now() END,
        unfinished = CASE WHEN u.new_state IN ('COMMITTED', 'INVALID', 'DISCARDED', 'CANCELLED') THEN false ELSE true END,
        invalid_details = COALESCE(NULLIF(u.invalid, '')::jsonb, b.invalid_details),
        claimant = sqlc.arg(claimant)::uuid, claim_epoch = u.epoch,
        updated_at = now()
    FROM u JOIN fenced f ON f.service_id = u.service_id AND f.epoch = u.epoch
    WHERE b.seq = u.seq AND b.service_id = u.service_id AND b.state = u.from_state AND b.attempts = u.attempt
    RETURNING b.seq, b.service_id, u.epoch, u.from_state, u.new_state, u.detail,
              EXTRACT(EPOCH FROM now() - b.created_at)::float8 AS age_seconds, sqlc.arg(track_idle)::bool AS track_idle
),
-- The attempts the batch rows carry as the statement found them (every CTE reads the same
-- snapshot): the mark of each batch adopted in flight, which its owner left there. Nothing but
-- an adoption writes a batch row while it is INFLIGHT (the owner's own writes are fenced off by
-- the takeover).
lost AS (
    SELECT r.seq, r.service_id, r.batch_id, r.instance_id, r.epoch, r.reason, r.from_state, r.started_at, r.marked_xid
    FROM batchclaim.batch_row_attempts r JOIN u ON u.seq = r.seq
    WHERE u.from_state = 'INFLIGHT' AND r.batch_state = 'INFLIGHT' AND r.attempt = u.attempt
),
lost_attempt AS (
    INSERT INTO batchclaim.submission_attempts (seq, service_id, batch_id, instance_id, epoch, reason, from_state, started_at, marked_xid)
    SELECT l.seq, l.service_id, l.batch_id, l.instance_id, l.epoch, l.reason, l.from_state, l.started_at, l.marked_xid
    FROM lost l JOIN recorded r ON r.seq = l.seq
),
logged AS (
    INSERT INTO batchclaim.batch_transitions (seq, from_state, to_state, instance_id, epoch, detail)
    SELECT r.seq, r.from_state, r.new_state, sqlc.arg(claimant)::uuid, r.epoch, r.detail
    FROM recorded r
    WHERE r.new_state <> r.from_state
),
halted AS (
    INSERT INTO batchclaim.service_halts (service_id, seq, reason)
    SELECT r.service_id, r.seq, 'batch INVALID'
    FROM recorded r
    WHERE sqlc.arg(halt_on_invalid)::bool AND r.new_state = 'INVALID'
    ON CONFLICT (service_id) DO NOTHING
),
drained AS (
    UPDATE batchclaim.service_id_claims c
    SET active_at = now()
    FROM (SELECT r.service_id, r.epoch, r.seq, r.track_idle FROM recorded r
          WHERE r.new_state IN ('COMMITTED', 'INVALID', 'DISCARDED', 'CANCELLED')) d
    WHERE d.track_idle
      AND c.service_id = d.service_id AND c.epoch = d.epoch AND (c.claimant = sqlc.arg(claimant)::uuid) IS TRUE
      AND NOT EXISTS (SELECT 1 FROM batchclaim.batches b WHERE b.service_id = d.service_id AND b.unfinished AND b.seq <> d.seq)
)
SELECT u.seq::bigint AS seq, (f.service_id IS NOT NULL)::bool AS fenced, (r.seq IS NOT NULL)::bool AS recorded,
       COALESCE(r.age_seconds, 0)::float8 AS age_seconds
FROM u
LEFT JOIN fenced f ON f.service_id = u.service_id AND f.epoch = u.epoch
LEFT JOIN recorded r ON r.seq = u.seq;

-- Operators' and applications' writes about one batch, not fenced on a claim: each is
-- conditional on the batch's state, so a write of the data path and one of these never both
-- succeed (whichever commits first wins; the other changes nothing and says so). Each logs its
-- change in batch_transitions (no instance, no epoch) and wakes the holder of the service_id.

-- name: BatchCancel :one
-- Cancels a batch that is not running and certainly never took effect, NEW (a run-at time
-- ahead or not) or DELAYED (its last POST was certainly not taken): it becomes CANCELLED,
-- terminal, and frees its service_id for the next batch. A batch that is running (INFLIGHT)
-- is asked to stop instead: the request is kept for the attempt that runs (cancel_attempt),
-- the instance running it is notified on its cancel channel (payload: the seq), and the
-- outcome of that attempt makes it CANCELLED (BatchesRecordOutcomes); it stays INFLIGHT
-- until then (requested). No row: no such batch, or it is in another state now. The row is
-- locked first: a concurrent outcome either commits before (the batch is DELAYED or finished
-- when the cancel reads it again) or after, and then sees the request.
WITH old AS (
    SELECT b.seq, b.service_id, b.state, b.claimant FROM batchclaim.batches b
    WHERE b.seq = sqlc.arg(seq) AND b.state IN ('NEW', 'DELAYED', 'INFLIGHT')
    FOR UPDATE
),
cancelled AS (
    UPDATE batchclaim.batches b
    SET state = 'CANCELLED', finished_at = now(), unfinished = false, updated_at = now(), next_attempt_at = NULL,
        last_error = NULLIF(sqlc.arg(detail)::text, '')
    FROM old o
    WHERE b.seq = o.seq AND o.state <> 'INFLIGHT'
    RETURNING b.seq, b.service_id, o.state AS from_state
),
requested AS (
    UPDATE batchclaim.batches b
    SET cancel_attempt = b.attempts, cancel_requested_at = now(),
        cancel_reason = COALESCE(NULLIF(sqlc.arg(detail)::text, ''), 'cancelled')
    FROM old o
    WHERE b.seq = o.seq AND o.state = 'INFLIGHT'
    RETURNING b.seq, b.service_id, b.claimant
),
logged AS (
    INSERT INTO batchclaim.batch_transitions (seq, from_state, to_state, detail)
    SELECT c.seq, c.from_state, 'CANCELLED', NULLIF(sqlc.arg(detail)::text, '') FROM cancelled c
)
SELECT c.seq, c.service_id, c.from_state, 'CANCELLED'::text AS to_state, false AS requested,
       (SELECT count(*) FROM (SELECT batchclaim.batchclaim_wake(c.service_id)) w)::bigint AS woken
FROM cancelled c
UNION ALL
SELECT r.seq, r.service_id, 'INFLIGHT'::text, 'INFLIGHT'::text, true,
       (SELECT count(*) FROM (SELECT pg_notify('batchclaim_cancel_' || replace(r.claimant::text, '-', ''), r.seq::text)) w)::bigint
FROM requested r;

-- name: BatchesCancelRequested :many
-- The cancel requests against the given jobs, which this instance runs: each still INFLIGHT
-- under this claimant at the attempt the request was made for. One probe of the primary key
-- per job.
SELECT b.seq, b.attempts, COALESCE(b.cancel_reason, 'cancelled')::text AS reason
FROM batchclaim.batches b
WHERE b.seq = ANY(sqlc.arg(seqs)::bigint[]) AND b.state = 'INFLIGHT'
  AND b.claimant = sqlc.arg(claimant)::uuid AND b.cancel_attempt = b.attempts;

-- name: BatchRetry :one
-- Runs a batch again. A DISCARDED, CANCELLED or INVALID one becomes NEW, due now, and goes to
-- the back of its service_id's queue as if it were enqueued now: it takes the enqueue's lock
-- (BatchInsert) and a new pos under it, so nothing of its service_id that is unfinished, in
-- flight above all, ever comes after it (docs/jobs.md, "Retry"). The INVALID batch that halts
-- its service_id keeps its place and lifts the halt: nothing of its service_id ran since it
-- halted. Its attempts go on counting from where they were (attempt numbers are never used
-- twice for one batch); attempt_base records them, and the attempt limit counts from there. A
-- DELAYED one becomes due now, in its place. Like an enqueue, the retry creates the
-- service_id's claim row again if it was dropped as idle, and wakes its holder (every
-- instance's claim cycle when nobody holds it) at commit. No row: no such batch, or it is in
-- another state now.
WITH target AS (
    SELECT b.service_id FROM batchclaim.batches b WHERE b.seq = sqlc.arg(seq)
),
serial AS (
    SELECT t.service_id, pg_advisory_xact_lock(hashtext('batchclaim.enqueue'), hashtext(t.service_id)) AS locked
    FROM target t
),
old AS (
    SELECT b.seq, b.service_id, b.state, (h.seq IS NOT NULL) AS halting
    FROM serial s
    JOIN batchclaim.batches b ON b.service_id = s.service_id
    LEFT JOIN batchclaim.service_halts h ON h.service_id = b.service_id AND h.seq = b.seq
    WHERE b.seq = sqlc.arg(seq) AND b.state IN ('DISCARDED', 'CANCELLED', 'INVALID', 'DELAYED')
    FOR UPDATE OF b
),
registered AS (
    INSERT INTO batchclaim.service_id_claims (service_id)
    SELECT o.service_id FROM old o
    ON CONFLICT (service_id) DO NOTHING
    RETURNING service_id
),
retried AS (
    UPDATE batchclaim.batches b
    SET state = CASE WHEN o.state = 'DELAYED' THEN 'DELAYED' ELSE 'NEW' END,
        pos = CASE WHEN o.state = 'DELAYED' OR o.halting THEN b.pos
                   ELSE nextval('batchclaim.batches_pos_seq') END,
        attempt_base = CASE WHEN o.state = 'DELAYED' THEN b.attempt_base ELSE b.attempts END,
        dlt_status = CASE WHEN o.state = 'DELAYED' THEN b.dlt_status END,
        next_attempt_at = now(), finished_at = NULL, unfinished = true, unknown_count = 0, unknown_since = NULL,
        updated_at = now()
    FROM old o
    WHERE b.seq = o.seq
    RETURNING b.seq, b.service_id, o.state AS from_state, b.state AS to_state
),
resumed AS (
    DELETE FROM batchclaim.service_halts h USING retried r
    WHERE h.service_id = r.service_id AND h.seq = r.seq
    RETURNING h.service_id
),
logged AS (
    INSERT INTO batchclaim.batch_transitions (seq, from_state, to_state, detail)
    SELECT r.seq, r.from_state, r.to_state, 'retry' FROM retried r
)
-- A claim row created here is held by nobody: wake the claim cycles. Otherwise wake the row's
-- holder, read when the wake runs.
SELECT r.seq, r.service_id, r.from_state, r.to_state,
       (SELECT count(*) FROM resumed)::bigint AS resumed,
       (CASE WHEN EXISTS (SELECT 1 FROM registered)
             THEN (SELECT count(*) FROM (SELECT pg_notify('batchclaim_free', '')) w)
             ELSE (SELECT count(*) FROM (SELECT batchclaim.batchclaim_wake(r.service_id)) w) END)::bigint AS woken
FROM retried r;

-- name: BatchesToPoll :many
-- Batches whose outcome the ledger still has to tell, of the given (claimed) service_ids:
-- accepted (PENDING), executed (VALID) or unknown; a page of them in (service_id, seq) order
-- after the cursor (after_service_id, after_seq), so that the poller rotates through all of
-- them however many there are. Only the first 16 unfinished batches of each service_id are
-- looked at (one index probe each): at most one is in flight, and it comes after the VALID ones
-- that let it go, so what the ledger has to tell is at the front; the backlog behind it is not
-- read.
SELECT p.seq, p.service_id, p.batch_id, p.state, p.attempts
FROM unnest(sqlc.arg(service_ids)::text[]) AS s(service_id)
CROSS JOIN LATERAL (
    SELECT b.seq, b.service_id, b.batch_id, b.state, b.attempts FROM batchclaim.batches b
    WHERE b.service_id = s.service_id AND b.unfinished
    ORDER BY b.pos
    LIMIT 16
) p
WHERE p.state IN ('PENDING', 'VALID', 'UNKNOWN')
  AND (p.service_id, p.seq) > (sqlc.arg(after_service_id)::text, sqlc.arg(after_seq)::bigint)
ORDER BY p.service_id, p.seq
LIMIT sqlc.arg(max_rows);

-- name: ServiceHalt :exec
INSERT INTO batchclaim.service_halts (service_id, seq, reason) VALUES (sqlc.arg(service_id), sqlc.arg(seq), sqlc.arg(reason))
ON CONFLICT (service_id) DO NOTHING;

-- name: BatchStatusesByID :many
-- For the ingest API's GET /batch_statuses: ledger batches, by the unique index on their ids.
SELECT batch_id, service_id, state, dlt_status, invalid_details
FROM batchclaim.batches WHERE batch_id = ANY(sqlc.arg(batch_ids)::text[]) AND ledger;

-- name: BatchStateCounts :many
SELECT service_id, state, count(*)::bigint AS batches,
       COALESCE(EXTRACT(EPOCH FROM now() - min(created_at) FILTER (WHERE unfinished)), 0)::float8 AS oldest_open_seconds
FROM batchclaim.batches
GROUP BY service_id, state
ORDER BY service_id, state;

-- name: BatchKindCounts :many
-- Jobs stored with a kind (package jobs), by kind and state, for the status command.
SELECT kind::text AS kind, state, count(*)::bigint AS batches
FROM batchclaim.batches
WHERE kind IS NOT NULL
GROUP BY kind, state
ORDER BY kind, state;

-- name: BatchStateTotals :many
SELECT state, count(*)::bigint AS batches FROM batchclaim.batches GROUP BY state;

-- name: BatchOpenStateTotals :many
-- Unfinished batches by state, for the /metrics gauge: the predicate is batches_open_idx's,
-- so a scrape reads open batches only, however many finished ones the table holds.
SELECT state, count(*)::bigint AS batches,
       COALESCE(EXTRACT(EPOCH FROM now() - min(created_at)), 0)::float8 AS oldest_seconds
FROM batchclaim.batches
WHERE unfinished
GROUP BY state;

-- name: ServiceHalts :many
SELECT service_id, seq, reason, at FROM batchclaim.service_halts ORDER BY service_id;

-- name: InstanceProgress :many
-- Per instance: claims held, batches it has in flight, batches it recorded COMMITTED.
SELECT i.id, i.name,
       (SELECT count(*) FROM batchclaim.service_id_claims c WHERE c.claimant = i.id)::bigint AS claims,
       (SELECT count(*) FROM batchclaim.batches b WHERE b.state = 'INFLIGHT' AND b.claimant = i.id)::bigint AS in_flight,
       (SELECT count(*) FROM batchclaim.batch_history t WHERE t.to_state = 'COMMITTED' AND t.instance_id = i.id)::bigint AS committed
FROM batchclaim.instances i
ORDER BY i.name;

-- name: DuplicateExplainers :many
-- Per batch: how many of its submissions had an outcome nobody saw (unknown, or never
-- recorded because the submitter died, hung or lost its claim: the adoption of its batch wrote
-- its row) and how many times the ledger said it did not know an accepted batch. Each one
-- explains one more POST of the batch. A POST still in flight explains none: the POST after
-- one is made only once its outcome is unknown, and then its row is written.
SELECT b.batch_id,
       ((SELECT count(*) FROM batchclaim.submission_attempts a WHERE a.seq = b.seq AND (a.outcome IS NULL OR a.outcome = 'unknown'))
      + (SELECT count(*) FROM batchclaim.batch_transitions t WHERE t.seq = b.seq AND t.to_state = 'UNKNOWN'
           AND t.from_state IN ('PENDING', 'VALID')))::bigint AS explainers
FROM batchclaim.batches b;

-- name: BatchSeqs :many
SELECT batch_id, service_id, seq, state FROM batchclaim.batches;
