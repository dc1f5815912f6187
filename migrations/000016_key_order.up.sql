-- A key's order is pos, not seq, and a job's attempts are never counted afresh.
--
-- pos: the job's place in its service_id's queue. An insert draws it from its own sequence
-- under the enqueue's lock, so for jobs that were never retried pos order is seq order is
-- commit order. A retried job draws a new pos under the same lock and goes to the back of its
-- queue: nothing ever takes a place before an unfinished job, so the job in flight is always
-- its key's head (the unfinished job with the lowest pos), and "busy" (the head is in flight)
-- means "a job of the key is in flight". Only the INVALID job that halts its key keeps its
-- place when retried: nothing of its key has run since it halted.
--
-- attempt_base: the attempts a job had made when it was last retried. attempts goes on
-- counting, so an attempt number is never used twice for one job (outcomes and polls are
-- fenced on it); the attempt limit and the backoff count from attempt_base.
ALTER TABLE batches ADD COLUMN pos bigint, ADD COLUMN attempt_base integer NOT NULL DEFAULT 0;
UPDATE batches SET pos = seq;
CREATE SEQUENCE batches_pos_seq OWNED BY batches.pos;
SELECT setval('batches_pos_seq', COALESCE((SELECT max(seq) FROM batches), 0) + 1, false);
ALTER TABLE batches ALTER COLUMN pos SET DEFAULT nextval('batches_pos_seq');
-- rolling-upgrade: the column has a default, so the previous release's inserts, which do not name it, fill it
ALTER TABLE batches ALTER COLUMN pos SET NOT NULL;

-- The index over unfinished batches by the new order. The previous release's queries order a
-- key's unfinished batches by seq: through this index they read the key's unfinished rows and
-- sort them, which is slower for a long backlog but gives the same head for every job that was
-- not retried by this release.
-- rolling-upgrade: replaced at once by the same index over (service_id, pos), which still finds a key's unfinished rows
DROP INDEX batches_open_idx;
CREATE INDEX batches_open_idx ON batches (service_id, pos) WHERE unfinished;

DO $do$
BEGIN
    EXECUTE format($f$
CREATE OR REPLACE FUNCTION batchclaim_head_in_flight(service_id text, claimant uuid, epoch bigint) RETURNS boolean
LANGUAGE sql STABLE AS $b$
    SELECT EXISTS (
        SELECT 1 FROM (
            SELECT b.state, b.claimant, b.claim_epoch FROM %I.batches b
            WHERE b.service_id = $1 AND b.unfinished AND b.state <> 'VALID'
            ORDER BY b.pos LIMIT 1
        ) h
        WHERE h.state = 'INFLIGHT' AND h.claimant = $2 AND h.claim_epoch = $3
    )
$b$$f$, current_schema());
END
$do$;
