DROP TRIGGER batches_notify_work ON batches;
CREATE TRIGGER batches_notify_work AFTER INSERT ON batches
    REFERENCING NEW TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION batchclaim_notify_work();
