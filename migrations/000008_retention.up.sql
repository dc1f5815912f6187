-- Retention: finished batches (COMMITTED, INVALID) whose finish time is older than the
-- configured age are deleted with their attempts and transitions (ON DELETE CASCADE), in
-- bounded chunks, oldest first. The finish time is updated_at: nothing writes a finished
-- batch again. This partial index holds finished batches only, in that order, so each chunk
-- reads just the rows it deletes.
--
-- Building it blocks writes to batches while it runs. On a large table, create it first by
-- hand with CREATE INDEX CONCURRENTLY and this exact definition; IF NOT EXISTS then skips it.
CREATE INDEX IF NOT EXISTS batches_finished_idx ON batches (updated_at, seq)
    WHERE state IN ('COMMITTED', 'INVALID');

-- The retention job's record (one row), for `batchclaim status`: who ran it last, with which
-- age, when, how many batches that run deleted, and how many all runs deleted.
CREATE TABLE retention_state (
    id              boolean     PRIMARY KEY DEFAULT true CHECK (id),
    instance_id     uuid        NOT NULL,
    max_age_ms      bigint      NOT NULL,
    last_run_at     timestamptz NOT NULL,
    last_run_pruned bigint      NOT NULL,
    pruned_total    bigint      NOT NULL
);
