-- The functions find the tables they use in the schema the migrations run in (batchclaim unless
-- configured otherwise), whatever the search_path of the statement that calls them or fires
-- their trigger: an application's transaction that stores batches has its own search_path.
-- batchclaim_finished_at names no table and is left as it is.

-- A trigger function and a rarely called one: their own search_path.
ALTER FUNCTION batchclaim_notify_work() SET search_path FROM CURRENT;
ALTER FUNCTION batchclaim_wake(text) SET search_path FROM CURRENT;

-- The claim queries and the claims view call this once per claim row: a SET clause would keep
-- Postgres from inlining it and cost a configuration change per call, so its body names the
-- schema instead.
DO $do$
BEGIN
    EXECUTE format($f$
CREATE OR REPLACE FUNCTION batchclaim_head_in_flight(service_id text, claimant uuid, epoch bigint) RETURNS boolean
LANGUAGE sql STABLE AS $b$
    SELECT EXISTS (
        SELECT 1 FROM (
            SELECT b.state, b.claimant, b.claim_epoch FROM %I.batches b
            WHERE b.service_id = $1 AND b.unfinished AND b.state <> 'VALID'
            ORDER BY b.seq LIMIT 1
        ) h
        WHERE h.state = 'INFLIGHT' AND h.claimant = $2 AND h.claim_epoch = $3
    )
$b$$f$, current_schema());
END
$do$;
