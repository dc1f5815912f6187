ALTER FUNCTION batchclaim_notify_work() RESET search_path;
ALTER FUNCTION batchclaim_wake(text) RESET search_path;
CREATE OR REPLACE FUNCTION batchclaim_head_in_flight(service_id text, claimant uuid, epoch bigint) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT EXISTS (
        SELECT 1 FROM (
            SELECT b.state, b.claimant, b.claim_epoch FROM batches b
            WHERE b.service_id = $1 AND b.unfinished AND b.state <> 'VALID'
            ORDER BY b.seq LIMIT 1
        ) h
        WHERE h.state = 'INFLIGHT' AND h.claimant = $2 AND h.claim_epoch = $3
    )
$$;
