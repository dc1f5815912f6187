-- An enqueue that is a transaction of its own wakes the holder of its service_id just after it
-- commits, instead of notifying from inside it.
--
-- Postgres serializes the commits of the transactions that notified, the flush of each one's
-- commit record included, under one lock. Single enqueues that each notified from inside their
-- own transaction could not share a WAL flush with each other and ran one flush after another
-- (230 a second from 16 producers on the 2-core test machine, against 1,300 for the same
-- statement without the notification; docs/performance.md). The trigger now leaves alone a
-- statement that set batchclaim_ingest.wake to 'after_commit' for its transaction, without
-- calling its function: ingest.Enqueue given a pool does, commits without notifying, and sends
-- the wake-up once the commit returned (BatchesWake), for the enqueues of many producers at
-- once, in a transaction whose commit does not wait for its flush. Every other writer (an
-- enqueue in the caller's transaction, an application's own INSERT, a resume) notifies at its
-- commit as before.
-- rolling-upgrade: created again at once in the same transaction, with a condition that the previous release's statements, which do not set the setting, always meet
DROP TRIGGER batches_notify_work ON batches;
CREATE TRIGGER batches_notify_work AFTER INSERT ON batches
    REFERENCING NEW TABLE AS changed
    FOR EACH STATEMENT
    WHEN (current_setting('batchclaim_ingest.wake', true) IS DISTINCT FROM 'after_commit')
    EXECUTE FUNCTION batchclaim_notify_work();
