ALTER FUNCTION batchclaim_finished_at() RESET search_path;
ALTER FUNCTION batchclaim_head_in_flight(text, uuid, bigint) RESET search_path;
ALTER FUNCTION batchclaim_notify_work() RESET search_path;
ALTER FUNCTION batchclaim_wake(text) RESET search_path;
