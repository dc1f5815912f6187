-- Enqueue deduplication moves from the batch rows to a table written once, at enqueue.
--
-- A batch row is updated at least twice after its insert (the in-flight mark and the outcome),
-- and the outcome's update cannot be HOT (it leaves the open index and enters the finished
-- one), so every index on batches takes a new entry at every finish. The unique index on
-- (service_id, batch_id), two text columns, was the widest of them; the job runner spent about
-- a fifth of the server's time on it (docs/performance.md). batch_keys holds the pair once per
-- batch and is never updated.
CREATE TABLE batch_keys (
    service_id text   NOT NULL,
    batch_id   text   NOT NULL,
    -- The batch row the pair names (batches.seq).
    seq        bigint NOT NULL,
    PRIMARY KEY (service_id, batch_id)
);

-- No batch is stored while the keys are copied: the copy and the constraint's removal are
-- one transaction, and an insert waits for it.
LOCK TABLE batches IN SHARE ROW EXCLUSIVE MODE;
INSERT INTO batch_keys (service_id, batch_id, seq) SELECT service_id, batch_id, seq FROM batches;

-- Every insert into batches, whoever writes it (ingest, the CLI, an application's own INSERT),
-- registers its pair first; a pair already registered makes the insert store nothing and
-- return no row, as ON CONFLICT DO NOTHING did on the unique constraint. A ledger batch id is
-- also unique across service_ids (batches_ledger_batch_id_key): its enqueues are serialized on
-- the id and checked before the pair is registered, so a ledger id stored under another
-- service_id leaves no pair behind. The body names the schema, as batchclaim_head_in_flight
-- does: a SET clause would cost a configuration change at every insert.
DO $do$
BEGIN
    EXECUTE format($f$
CREATE FUNCTION batchclaim_batch_key() RETURNS trigger LANGUAGE plpgsql AS $b$
BEGIN
    IF NEW.ledger THEN
        PERFORM pg_advisory_xact_lock(hashtext('batchclaim.ledger_batch_id'), hashtext(NEW.batch_id));
        IF EXISTS (SELECT 1 FROM %1$I.batches WHERE batch_id = NEW.batch_id AND ledger) THEN
            RETURN NULL;
        END IF;
    END IF;
    INSERT INTO %1$I.batch_keys (service_id, batch_id, seq) VALUES (NEW.service_id, NEW.batch_id, NEW.seq)
    ON CONFLICT DO NOTHING;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    RETURN NEW;
END
$b$$f$, current_schema());

-- A deleted batch (retention, an operator) frees its pair: the same batch_id may be stored
-- again, as before. A TRUNCATE of batches empties batch_keys.
    EXECUTE format($f$
CREATE FUNCTION batchclaim_drop_batch_keys() RETURNS trigger LANGUAGE plpgsql AS $b$
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        TRUNCATE %1$I.batch_keys;
    ELSE
        DELETE FROM %1$I.batch_keys k USING gone g
        WHERE k.service_id = g.service_id AND k.batch_id = g.batch_id AND k.seq = g.seq;
    END IF;
    RETURN NULL;
END
$b$$f$, current_schema());
END
$do$;

CREATE TRIGGER batches_key BEFORE INSERT ON batches FOR EACH ROW
    EXECUTE FUNCTION batchclaim_batch_key();
CREATE TRIGGER batches_drop_keys AFTER DELETE ON batches
    REFERENCING OLD TABLE AS gone
    FOR EACH STATEMENT EXECUTE FUNCTION batchclaim_drop_batch_keys();
CREATE TRIGGER batches_truncate_keys AFTER TRUNCATE ON batches
    FOR EACH STATEMENT EXECUTE FUNCTION batchclaim_drop_batch_keys();

-- rolling-upgrade: upgrading from v0.1.0 stops every instance (the move into the schema), and no release since has run with this constraint; every insert goes through batches_key instead
ALTER TABLE batches DROP CONSTRAINT batches_service_id_batch_id_key;
