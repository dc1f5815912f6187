-- A bulk enqueue registers its jobs' keys in one set-based insert instead of one trigger call
-- per row.
--
-- batches_key (migration 15) runs a PL/pgSQL function for every row inserted into batches: a
-- call and an INSERT ... ON CONFLICT of its own per row, about 43 % of the server's time of a
-- 10,000-job EnqueueMany (docs/performance.md). BatchesInsertMany now draws the rows' seqs
-- first, registers their pairs with batchclaim_register_keys (below; a pair already
-- registered, or earlier in the list, is skipped as the trigger skips it), inserts only the
-- rows whose pair it registered, and tells the trigger so through batchclaim_keys_registered_through: the
-- highest seq it registered keys for, in a setting local to its transaction. The trigger now
-- runs for a row whose seq is above that, which every other insert's is: a sequence never
-- hands out a number twice, so any insert after the bulk statement draws a higher seq, and an
-- insert that does not set the setting (any writer but the bulk statement, a previous
-- release's included) always runs it. An insert that names its own seq is not supported.
-- rolling-upgrade: created again at once in the same transaction, with a condition that every statement of the previous release meets
DROP TRIGGER batches_key ON batches;
CREATE TRIGGER batches_key BEFORE INSERT ON batches
    FOR EACH ROW
    WHEN (NEW.seq > COALESCE(NULLIF(current_setting('batchclaim_ingest.keyed_through', true), '')::bigint, 0))
    EXECUTE FUNCTION batchclaim_batch_key();

-- Records that the statement calling it registered the keys of the rows it inserts with a seq
-- up to through. A function, not a set_config in the statement, so that a binary that expects
-- this schema fails against an older one instead of having its rows skipped as duplicates.
CREATE FUNCTION batchclaim_keys_registered_through(through bigint) RETURNS bigint
LANGUAGE sql VOLATILE STRICT AS $$
    SELECT set_config('batchclaim_ingest.keyed_through', through::text, true)::bigint
$$;

-- Registers pairs in batch_keys, in the order given, and returns the seqs of those it
-- registered: a pair already registered, or earlier in the list, is skipped. A plain insert
-- first (one index descent per pair); only when some pair is taken does it insert again with
-- ON CONFLICT DO NOTHING (two descents per pair, a pre-check and the insert), after the first
-- try rolled back to the block's start.
DO $do$
BEGIN
    EXECUTE format($f$
CREATE FUNCTION batchclaim_register_keys(service_ids text[], batch_ids text[], seqs bigint[]) RETURNS bigint[]
LANGUAGE plpgsql VOLATILE STRICT AS $b$
DECLARE
    registered bigint[];
BEGIN
    BEGIN
        WITH ins AS (
            INSERT INTO %1$I.batch_keys (service_id, batch_id, seq)
            SELECT * FROM unnest(service_ids, batch_ids, seqs)
            RETURNING seq
        )
        SELECT array_agg(seq) INTO registered FROM ins;
    EXCEPTION WHEN unique_violation THEN
        WITH ins AS (
            INSERT INTO %1$I.batch_keys (service_id, batch_id, seq)
            SELECT * FROM unnest(service_ids, batch_ids, seqs)
            ON CONFLICT DO NOTHING
            RETURNING seq
        )
        SELECT array_agg(seq) INTO registered FROM ins;
    END;
    RETURN coalesce(registered, '{}');
END
$b$$f$, current_schema());
END
$do$;
