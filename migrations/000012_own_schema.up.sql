-- The functions find the tables they use in the schema the migrations run in (batchclaim unless
-- configured otherwise), whatever the search_path of the statement that calls them or fires
-- their trigger: an application's transaction that stores batches has its own search_path.
ALTER FUNCTION batchclaim_finished_at() SET search_path FROM CURRENT;
ALTER FUNCTION batchclaim_head_in_flight(text, uuid, bigint) SET search_path FROM CURRENT;
ALTER FUNCTION batchclaim_notify_work() SET search_path FROM CURRENT;
ALTER FUNCTION batchclaim_wake(text) SET search_path FROM CURRENT;
