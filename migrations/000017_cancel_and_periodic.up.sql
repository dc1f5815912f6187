-- Cancelling a running job, and periodic jobs.
--
-- cancel_attempt, cancel_requested_at, cancel_reason: a Cancel of an INFLIGHT job (BatchCancel)
-- records a request for the attempt that runs (cancel_attempt = attempts) and notifies the
-- instance running it on batchclaim_cancel_<instance id without dashes>, with the job's seq as
-- payload; that instance also looks for requests against its running jobs every renew
-- interval, so a notification lost costs that long. The recorded outcome of that attempt makes
-- the job CANCELLED with cancel_reason as its last error, unless the outcome says the job took
-- effect or may still take effect (COMMITTED, PENDING, UNKNOWN): a request is for one attempt
-- and is never read for another (attempts never repeat for one job). The previous release
-- neither reads nor writes these columns: its instances finish a job as its outcome says.
ALTER TABLE batches
    ADD COLUMN cancel_attempt integer,
    ADD COLUMN cancel_requested_at timestamptz,
    ADD COLUMN cancel_reason text;

-- Periodic jobs (package periodic): one row per schedule, by name. Every instance configured
-- with a schedule upserts its row at start (schedule and service_id as configured, for the
-- status page) and enqueues a tick by advancing last_tick in the same transaction as the
-- tick's job, conditionally (last_tick before the tick): of all instances, the tick's job is
-- stored once. next_tick is the schedule's next tick as the instance that wrote last saw it.
CREATE TABLE periodic_jobs (
    name          text PRIMARY KEY,
    schedule      text NOT NULL,
    service_id    text NOT NULL,
    last_tick     timestamptz,
    last_seq      bigint,
    next_tick     timestamptz,
    registered_at timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now()
);
