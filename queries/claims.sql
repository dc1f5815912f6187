-- Claims. Everything that decides expiry compares with the database clock: now(), or the
-- optional now a test passes to move the database's view of time.
--
-- A claim is busy while its owner has a POST in flight: its service_id's head batch (the
-- oldest unfinished one, VALID ones aside) is INFLIGHT under the claim's owner and epoch, or
-- (for users of the claim engine alone) submitting_since is set. Past expiry_1 a busy claim is
-- kept for its owner until expiry_2. Statements that take a claim away from its owner judge
-- busy with a snapshot taken after they locked the claim row: the data path fences its writes
-- with a shared lock on the claim row, so a mark committed before the lock is seen, and one
-- after it finds the claim gone.

-- name: ClaimsRegister :execrows
INSERT INTO batchclaim.service_id_claims (service_id)
SELECT unnest(sqlc.arg(service_ids)::text[])
ON CONFLICT (service_id) DO NOTHING;

-- name: ClaimsSurvey :one
-- Everything one claim cycle needs to know, in one statement, so that an instance with
-- nothing to change costs one statement per cycle: whether the registry row is still this
-- process's, the live instances (fair share divides the work among them), the number of
-- service_ids and of free ones, whether any claim waits to be voided, a fingerprint of this
-- instance's own claims (count and sum of epochs: it changes whenever the set does, since
-- only this instance's own statements add to it and every acquisition draws a new epoch),
-- and how many of them may be dropped as idle. Plain reads: advice, not safety; every write
-- that follows re-checks its rows.
--
-- Counting the service_ids reads every row of the table (11 ms for 100,000 on a two-core
-- machine), which every instance paid at every cycle though the number changes only when
-- service_ids come or go. count_all says when to count: 2 always, 1 only if some row is
-- free (a free row is how a new service_id shows), 0 never; service_ids is -1 when not
-- counted, and the engine goes on with the count it read last (claims/cycle.go). free is
-- counted up to free_cap rows through the free index: the plan asks only whether some are
-- free, and how many only as far as one cycle can drop.
--
-- The last four columns are for the failover guard (claims/guard.go): the server's
-- timeline, whether its commits wait for a synchronous standby, the epoch sequence, and this
-- instance's last renewal (the epoch when there is none). The idle switch and count_all are
-- read through sub-selects: as a parameter, a custom plan for idle_ms = 0 (the default)
-- folds the idle count away and looks cheaper than the generic plan, and Postgres planned
-- the survey at every cycle.
SELECT
    EXISTS (SELECT 1 FROM batchclaim.instances i WHERE i.id = sqlc.arg(claimant)::uuid AND i.nonce = sqlc.arg(nonce)::uuid)::bool AS owned,
    ARRAY(SELECT i.id FROM batchclaim.instances i WHERE i.expiry_1 > COALESCE(sqlc.narg(now)::timestamptz, now()) ORDER BY i.id)::uuid[] AS live,
    (CASE WHEN (SELECT sqlc.arg(count_all)::int) = 2 OR ((SELECT sqlc.arg(count_all)::int) = 1 AND fr.free > 0)
          THEN (SELECT count(*) FROM batchclaim.service_id_claims) ELSE -1 END)::bigint AS service_ids,
    fr.free::bigint AS free,
    EXISTS (
        SELECT 1 FROM batchclaim.instances i
        WHERE i.expiry_1 <= COALESCE(sqlc.narg(now)::timestamptz, now())
          AND EXISTS (SELECT 1 FROM batchclaim.service_id_claims c WHERE c.claimant = i.id
                      AND (i.expiry_2 <= COALESCE(sqlc.narg(now)::timestamptz, now()) OR NOT (c.submitting_since IS NOT NULL OR batchclaim.batchclaim_head_in_flight(c.service_id, c.claimant, c.epoch))))
    )::bool AS voidable,
    own.held, own.epoch_sum, own.idle,
    ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::bigint AS timeline,
    (current_setting('synchronous_standby_names') <> '' AND current_setting('synchronous_commit') NOT IN ('off', 'local'))::bool AS sync_standby,
    COALESCE(pg_sequence_last_value('batchclaim.service_id_claim_epochs'::regclass), 0)::bigint AS epochs,
    COALESCE((SELECT i.heartbeat_at FROM batchclaim.instances i WHERE i.id = sqlc.arg(claimant)::uuid AND i.nonce = sqlc.arg(nonce)::uuid), 'epoch'::timestamptz)::timestamptz AS heartbeat_at
FROM (
    SELECT count(*)::bigint AS held, COALESCE(sum(c.epoch), 0)::bigint AS epoch_sum,
           count(*) FILTER (WHERE (SELECT sqlc.arg(idle_ms)::bigint) > 0 AND c.submitting_since IS NULL
               AND COALESCE(c.active_at, c.claimed_at, c.registered_at)
                   <= COALESCE(sqlc.narg(now)::timestamptz, now()) - sqlc.arg(idle_ms)::bigint * interval '1 millisecond'
               AND NOT EXISTS (SELECT 1 FROM batchclaim.batches b WHERE b.service_id = c.service_id AND b.unfinished))::bigint AS idle
    FROM batchclaim.service_id_claims c
    WHERE c.claimant = sqlc.arg(claimant)::uuid
) own, (
    SELECT count(*) AS free FROM (
        SELECT 1 FROM batchclaim.service_id_claims f WHERE f.claimant IS NULL
        ORDER BY hashtextextended(f.service_id, 0) LIMIT (SELECT sqlc.arg(free_cap)::int)
    ) x
) fr;

-- name: ClaimsLockVoidable :many
-- Two-phase maintenance, one bounded chunk at a time, in a transaction with ClaimsVoid: locks
-- claims that look void by this statement's snapshot (their claimant's lease is past expiry_2,
-- or past expiry_1 while the claim is not busy). Rows another transaction has locked (an owner
-- writing about the service_id, another instance voiding the same chunk) are skipped, not
-- waited for.
SELECT c.service_id, c.claimant, c.epoch
FROM batchclaim.instances i
JOIN batchclaim.service_id_claims c ON c.claimant = i.id
WHERE i.expiry_1 <= COALESCE(sqlc.narg(now)::timestamptz, now())
  AND (i.expiry_2 <= COALESCE(sqlc.narg(now)::timestamptz, now()) OR NOT (c.submitting_since IS NOT NULL OR batchclaim.batchclaim_head_in_flight(c.service_id, c.claimant, c.epoch)))
LIMIT sqlc.arg(max)::int
FOR UPDATE OF c SKIP LOCKED;

-- name: ClaimsVoid :many
-- The second statement of voiding, whose snapshot comes after ClaimsLockVoidable's locks:
-- frees the locked claims that are still held with the same claimant and epoch and still void
-- (a POST marked in flight before the lock keeps its claim in phase two), and logs each.
WITH cand AS (
    SELECT unnest(sqlc.arg(service_ids)::text[]) AS service_id,
           -- As text: behind a pooler statements run in pgx's exec mode, which cannot send a
           -- uuid[] of google/uuid values.
           unnest(sqlc.arg(claimants)::text[])::uuid AS claimant,
           unnest(sqlc.arg(epochs)::bigint[]) AS epoch
),
voided AS (
    UPDATE batchclaim.service_id_claims c
    SET claimant = NULL, submitting_since = NULL
    FROM cand JOIN batchclaim.instances i ON i.id = cand.claimant
    WHERE c.service_id = cand.service_id AND c.claimant = cand.claimant AND c.epoch = cand.epoch
      AND i.expiry_1 <= COALESCE(sqlc.narg(now)::timestamptz, now())
      AND (i.expiry_2 <= COALESCE(sqlc.narg(now)::timestamptz, now()) OR NOT (c.submitting_since IS NOT NULL OR batchclaim.batchclaim_head_in_flight(c.service_id, c.claimant, c.epoch)))
    RETURNING c.service_id, cand.claimant AS instance_id, c.epoch,
              CASE WHEN i.expiry_2 <= COALESCE(sqlc.narg(now)::timestamptz, now()) THEN 'voided_expired' ELSE 'voided_idle' END AS event
)
INSERT INTO batchclaim.claim_events (service_id, instance_id, epoch, event)
SELECT v.service_id, v.instance_id, v.epoch, v.event FROM voided v
RETURNING service_id, instance_id, epoch, event;

-- name: ClaimsHeld :many
SELECT service_id, epoch, claimed_at, submitting_since
FROM batchclaim.service_id_claims
WHERE claimant = sqlc.arg(claimant)::uuid
ORDER BY service_id;

-- name: ClaimsWakeHolders :one
-- Passes a wake-up on to whoever holds each of the given service_ids now, other than
-- claimant: the notification of an enqueue (or a retry) is addressed by the claim row as its
-- statement saw it, so one whose transaction committed after the service_id moved reaches the
-- former owner, who sends it on from here. A service_id nobody holds wakes every instance's
-- claim cycle. Returns how many were sent on.
SELECT count(pg_notify(CASE WHEN c.claimant IS NULL THEN 'batchclaim_free'
                            ELSE 'batchclaim_work_' || replace(c.claimant::text, '-', '') END,
                       CASE WHEN c.claimant IS NULL THEN '' ELSE c.service_id END))::bigint AS sent
FROM batchclaim.service_id_claims c
WHERE c.service_id = ANY(sqlc.arg(service_ids)::text[])
  AND c.claimant IS DISTINCT FROM sqlc.arg(claimant)::uuid;

-- name: ClaimsAcquire :many
-- Takes up to max free claims, reading the free index from a random point of its hash order
-- (wrapping around) so that concurrent acquirers mostly read different index pages, and
-- skipping rows another acquirer has just locked instead of waiting for them. The rows are
-- found by primary key (= ANY of the picked ids) and the claimant checked again in a form no
-- index answers (num_nulls): as a join, or with "claimant IS NULL", the planner may read
-- every free row through the claimant index or a sequential scan for each chunk, which made
-- the first cycles of 32 instances over 100,000 new service_ids take seconds.
WITH after_start AS (
    SELECT f.service_id FROM batchclaim.service_id_claims f
    WHERE f.claimant IS NULL AND hashtextextended(f.service_id, 0) >= sqlc.arg(start)::bigint
    ORDER BY hashtextextended(f.service_id, 0) LIMIT sqlc.arg(max)::int
    FOR UPDATE SKIP LOCKED
),
before_start AS (
    SELECT f.service_id FROM batchclaim.service_id_claims f
    WHERE f.claimant IS NULL AND hashtextextended(f.service_id, 0) < sqlc.arg(start)::bigint
    ORDER BY hashtextextended(f.service_id, 0) LIMIT sqlc.arg(max)::int
    FOR UPDATE SKIP LOCKED
),
pick AS (
    -- The rows after the start point, then (only if those were too few: the LIMIT stops the
    -- Append before it reads its second part) those before it: a chunk locks at most max free
    -- rows, not max on each side of the start.
    (SELECT a.service_id FROM after_start a)
    UNION ALL
    (SELECT b.service_id FROM before_start b)
    LIMIT sqlc.arg(max)::int
),
taken AS (
    UPDATE batchclaim.service_id_claims c
    SET claimant = sqlc.arg(claimant)::uuid, epoch = nextval('batchclaim.service_id_claim_epochs'), claimed_at = COALESCE(sqlc.narg(now)::timestamptz, now()), submitting_since = NULL
    WHERE c.service_id = ANY (ARRAY(SELECT pick.service_id FROM pick)) AND num_nulls(c.claimant) = 1
    RETURNING c.service_id, c.epoch, c.claimed_at
),
logged AS (
    INSERT INTO batchclaim.claim_events (service_id, instance_id, epoch, event)
    SELECT taken.service_id, sqlc.arg(claimant)::uuid, taken.epoch, 'acquired' FROM taken
)
SELECT service_id, epoch, claimed_at FROM taken;

-- name: ClaimsAcquireWithWork :many
-- Acquisition while idle free rows are still being dropped: only free rows with an
-- unfinished batch, found from the partial index of unfinished batches (so the cost follows
-- the keys with work, not the idle rows), and no more than a fair part of them (the free
-- rows with work divided by the live instances, rounded up), so that the first instance to
-- look does not take them all. Rows another transaction has locked are skipped.
WITH work AS (
    SELECT DISTINCT b.service_id FROM batchclaim.batches b WHERE b.unfinished
),
free_work AS (
    SELECT f.service_id FROM batchclaim.service_id_claims f JOIN work w ON w.service_id = f.service_id
    WHERE f.claimant IS NULL
),
pick AS (
    SELECT f.service_id FROM batchclaim.service_id_claims f
    WHERE f.claimant IS NULL AND f.service_id IN (SELECT fw.service_id FROM free_work fw)
    ORDER BY hashtextextended(f.service_id, 0)
    LIMIT LEAST(sqlc.arg(max)::int, (SELECT (count(*) + sqlc.arg(live)::int - 1) / sqlc.arg(live)::int FROM free_work))
    FOR UPDATE SKIP LOCKED
),
taken AS (
    UPDATE batchclaim.service_id_claims c
    SET claimant = sqlc.arg(claimant)::uuid, epoch = nextval('batchclaim.service_id_claim_epochs'), claimed_at = COALESCE(sqlc.narg(now)::timestamptz, now()), submitting_since = NULL
    WHERE c.service_id = ANY (ARRAY(SELECT pick.service_id FROM pick)) AND num_nulls(c.claimant) = 1
    RETURNING c.service_id, c.epoch, c.claimed_at
),
logged AS (
    INSERT INTO batchclaim.claim_events (service_id, instance_id, epoch, event)
    SELECT taken.service_id, sqlc.arg(claimant)::uuid, taken.epoch, 'acquired' FROM taken
)
SELECT service_id, epoch, claimed_at FROM taken;

-- name: ClaimsLockIdle :many
-- The first step of dropping idle claim rows, in a transaction: own claims idle past the
-- cutoff, each only if no enqueue of its service_id is running (the enqueue's advisory lock
-- is free; taking it here makes the next enqueue wait until the drop commits). The locks are
-- taken last, on the chosen rows only; locked says which were taken (the caller drops only
-- those, and counts the rest as candidates, so that one long enqueue does not make every
-- chunk look short).
SELECT s.service_id, s.epoch,
       pg_try_advisory_xact_lock(hashtext('batchclaim.enqueue'), hashtext(s.service_id))::bool AS locked
FROM (
    SELECT c.service_id, c.epoch FROM batchclaim.service_id_claims c
    WHERE c.claimant = sqlc.arg(claimant)::uuid AND c.submitting_since IS NULL
      AND COALESCE(c.active_at, c.claimed_at, c.registered_at)
          <= COALESCE(sqlc.narg(now)::timestamptz, now()) - sqlc.arg(idle_ms)::bigint * interval '1 millisecond'
      -- Checked again after the locks; here it keeps keys with long-unfinished work (a
      -- halted service_id, a batch the ledger is slow on) from filling every chunk.
      AND NOT EXISTS (SELECT 1 FROM batchclaim.batches b WHERE b.service_id = c.service_id AND b.unfinished)
    ORDER BY c.service_id
    LIMIT sqlc.arg(max)::int
) s;

-- name: ClaimsLockIdleFree :many
-- The same first step for free claim rows (no claimant: never acquired, released, or voided
-- from a dead owner): any live instance may drop them, so that an idle row is deleted without
-- being acquired first. Rows another transaction has locked (an acquirer, another instance
-- dropping) are skipped, so concurrent droppers take different rows.
SELECT s.service_id, s.epoch,
       pg_try_advisory_xact_lock(hashtext('batchclaim.enqueue'), hashtext(s.service_id))::bool AS locked
FROM (
    SELECT f.service_id, f.epoch FROM batchclaim.service_id_claims f
    WHERE f.claimant IS NULL
      AND COALESCE(f.active_at, f.claimed_at, f.registered_at)
          <= COALESCE(sqlc.narg(now)::timestamptz, now()) - sqlc.arg(idle_ms)::bigint * interval '1 millisecond'
      AND NOT EXISTS (SELECT 1 FROM batchclaim.batches b WHERE b.service_id = f.service_id AND b.unfinished)
    ORDER BY hashtextextended(f.service_id, 0)
    LIMIT sqlc.arg(max)::int
    FOR UPDATE SKIP LOCKED
) s;

-- name: ClaimsDropIdle :many
-- The second step, in the same transaction and so with a snapshot taken after the locks:
-- deletes the locked claim rows that are still held by claimant (still free, when claimant
-- is NULL) with the same epoch and have no unfinished batch (an enqueue that committed
-- before the lock is seen here). The next enqueue creates the row again, and its next
-- acquisition draws a new epoch. An owner's drop ends its ownership and is logged as
-- 'dropped'; a free row's drop ends none and is not logged.
WITH wanted AS (
    SELECT unnest(sqlc.arg(service_ids)::text[]) AS service_id, unnest(sqlc.arg(epochs)::bigint[]) AS epoch
),
dropped AS (
    DELETE FROM batchclaim.service_id_claims c
    USING wanted
    WHERE c.service_id = wanted.service_id AND c.epoch = wanted.epoch
      AND c.claimant IS NOT DISTINCT FROM sqlc.narg(claimant)::uuid AND c.submitting_since IS NULL
      AND NOT EXISTS (SELECT 1 FROM batchclaim.batches b WHERE b.service_id = c.service_id AND b.unfinished)
    RETURNING c.service_id, c.epoch, c.claimant
),
logged AS (
    INSERT INTO batchclaim.claim_events (service_id, instance_id, epoch, event)
    SELECT d.service_id, d.claimant, d.epoch, 'dropped' FROM dropped d WHERE d.claimant IS NOT NULL
)
SELECT service_id, epoch FROM dropped;

-- name: ClaimsLockOwn :many
-- The first statement of giving claims back, in a transaction with ClaimsRelease: locks up to
-- max of the given claims still held by claimant with the given epoch, in the order given,
-- skipping rows another transaction has locked (an owner's write in flight, or another
-- instance's acquisition that read the row as free before this instance took it: Postgres
-- keeps the lock it took to recheck the row until that statement ends). A skipped row makes
-- room for the next one given, so that a few locked rows do not hold back the release.
-- Skipping never waits, so the order cannot deadlock.
WITH wanted AS (
    SELECT w.service_id, (sqlc.arg(epochs)::bigint[])[w.ord] AS epoch, w.ord
    FROM unnest(sqlc.arg(service_ids)::text[]) WITH ORDINALITY AS w(service_id, ord)
)
SELECT c.service_id, c.epoch FROM batchclaim.service_id_claims c
JOIN wanted w ON w.service_id = c.service_id AND w.epoch = c.epoch
WHERE c.claimant = sqlc.arg(claimant)::uuid
ORDER BY w.ord
LIMIT sqlc.arg(max)::int
FOR UPDATE OF c SKIP LOCKED;

-- name: ClaimsRelease :many
-- Gives claims back, each only if it is still held with the given epoch. event says why
-- (released on stop, surplus_released for fair share). With only_idle, busy claims are kept;
-- run it after ClaimsLockOwn in the same transaction, so that busy is judged after the lock.
WITH wanted AS (
    SELECT unnest(sqlc.arg(service_ids)::text[]) AS service_id, unnest(sqlc.arg(epochs)::bigint[]) AS epoch
),
released AS (
    UPDATE batchclaim.service_id_claims c
    SET claimant = NULL, submitting_since = NULL
    FROM wanted
    WHERE c.service_id = wanted.service_id AND c.epoch = wanted.epoch
      AND c.claimant = sqlc.arg(claimant)::uuid
      AND (NOT sqlc.arg(only_idle)::bool OR NOT (c.submitting_since IS NOT NULL OR batchclaim.batchclaim_head_in_flight(c.service_id, c.claimant, c.epoch)))
    RETURNING c.service_id, c.epoch
)
INSERT INTO batchclaim.claim_events (service_id, instance_id, epoch, event)
SELECT r.service_id, sqlc.arg(claimant)::uuid, r.epoch, sqlc.arg(event)::text FROM released r
RETURNING service_id, epoch;

-- name: ClaimsReleaseOwned :many
-- A stopping instance gives back every claim the database lists as its own, whether or not it
-- knows of it (a cycle whose commit it did not see may have taken some), except those in
-- keep: epoch-checked through the owner row's nonce, each logged as released.
WITH released AS (
    UPDATE batchclaim.service_id_claims c
    SET claimant = NULL, submitting_since = NULL
    WHERE c.claimant = sqlc.arg(claimant)::uuid
      AND NOT (c.service_id = ANY(sqlc.arg(keep)::text[]))
      AND EXISTS (SELECT 1 FROM batchclaim.instances i WHERE i.id = c.claimant AND i.nonce = sqlc.arg(nonce)::uuid)
    RETURNING c.service_id, c.epoch
)
INSERT INTO batchclaim.claim_events (service_id, instance_id, epoch, event)
SELECT r.service_id, sqlc.arg(claimant)::uuid, r.epoch, 'released' FROM released r
RETURNING service_id, epoch;

-- name: ClaimBeginSubmission :one
-- Marks the claim busy before a POST. Fenced on (claimant, epoch) and refused unless the
-- claimant's lease is still in phase one by the database clock. Being an UPDATE of the claim
-- row, it conflicts with a concurrent fast-path takeover of the same row: one of the two wins.
UPDATE batchclaim.service_id_claims c
SET submitting_since = COALESCE(c.submitting_since, COALESCE(sqlc.narg(now)::timestamptz, now()))
FROM batchclaim.instances i
WHERE c.service_id = sqlc.arg(service_id) AND c.claimant = sqlc.arg(claimant)::uuid AND c.epoch = sqlc.arg(epoch)
  AND i.id = c.claimant AND i.nonce = sqlc.arg(nonce)::uuid AND i.expiry_1 > COALESCE(sqlc.narg(now)::timestamptz, now())
RETURNING c.submitting_since;

-- name: ClaimEndSubmission :execrows
UPDATE batchclaim.service_id_claims
SET submitting_since = NULL, active_at = now()
WHERE service_id = sqlc.arg(service_id) AND claimant = sqlc.arg(claimant)::uuid AND epoch = sqlc.arg(epoch);

-- name: ClaimFence :one
-- Locks the claim row for the rest of the caller's transaction if and only if it is still
-- held with this epoch. A takeover waits for the caller's commit; a takeover that committed
-- first makes this return no row.
-- The nonce check makes the fence fail for a process whose instance row was taken over.
SELECT c.epoch FROM batchclaim.service_id_claims c
WHERE c.service_id = sqlc.arg(service_id) AND c.claimant = sqlc.arg(claimant)::uuid AND c.epoch = sqlc.arg(epoch)
  AND EXISTS (SELECT 1 FROM batchclaim.instances i WHERE i.id = c.claimant AND i.nonce = sqlc.arg(nonce)::uuid)
FOR SHARE OF c;

-- name: ClaimsVoidOwner :many
-- Frees every claim of a dead instance whose id is registered again by a new process.
WITH voided AS (
    UPDATE batchclaim.service_id_claims c
    SET claimant = NULL, submitting_since = NULL
    WHERE c.claimant = sqlc.arg(claimant)::uuid
    RETURNING c.service_id, c.epoch
)
INSERT INTO batchclaim.claim_events (service_id, instance_id, epoch, event)
SELECT v.service_id, sqlc.arg(claimant)::uuid, v.epoch, 'voided_expired' FROM voided v
RETURNING service_id, epoch;

-- name: ClaimsCensus :one
-- The number of service_ids and of free ones (for status).
SELECT (SELECT count(*) FROM batchclaim.service_id_claims)::bigint AS service_ids,
       (SELECT count(*) FROM batchclaim.service_id_claims WHERE claimant IS NULL)::bigint AS free;

-- name: ClaimsEffective :many
SELECT service_id, claimant, claimant_name, epoch, claimed_at, renewed_at, expiry_1, expiry_2,
       submitting_since, phase, busy
FROM batchclaim.service_id_claims_effective
ORDER BY service_id
LIMIT sqlc.narg(max_rows);

-- name: ClaimsPerInstance :many
SELECT claimant, count(*)::bigint AS claims, count(*) FILTER (WHERE busy)::bigint AS submitting
FROM batchclaim.service_id_claims_effective
WHERE claimant IS NOT NULL
GROUP BY claimant;

-- name: ClaimEvents :many
SELECT id, service_id, instance_id, epoch, event, at
FROM batchclaim.claim_events
WHERE id > sqlc.arg(after_id)
ORDER BY id
LIMIT sqlc.arg(max_rows);

-- name: ClockNow :one
SELECT clock_timestamp()::timestamptz AS now;

-- name: TakeoverDelays :many
-- For every claim voided from an instance: seconds from since (when it failed) until the
-- service_id was acquired again (-1 while it is not).
SELECT v.service_id, v.event,
       COALESCE(EXTRACT(EPOCH FROM (
           SELECT min(a.at) FROM batchclaim.claim_events a
           WHERE a.service_id = v.service_id AND a.event = 'acquired' AND a.epoch > v.epoch
       ) - sqlc.arg(since)::timestamptz)::float8, -1)::float8 AS seconds
FROM batchclaim.claim_events v
WHERE v.instance_id = sqlc.arg(instance_id)::uuid AND v.event IN ('voided_idle', 'voided_expired');

-- name: TakeoverCount :one
SELECT count(*)::bigint FROM batchclaim.claim_events WHERE event IN ('voided_idle', 'voided_expired');
