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

-- A ledger batch id is unique across service_ids (batches_ledger_batch_id_key). Its enqueue
-- registers the id here too, after its pair, so that an id already stored under another
-- service_id is refused before the batch row is written, and its pair taken back: a refused
-- enqueue leaves nothing. A unique key, not a lock per id: a transaction that stores many
-- ledger batches takes no entry of the server's lock table for each.
CREATE TABLE ledger_batch_keys (
    batch_id text   PRIMARY KEY,
    -- The batch row the id names (batches.seq).
    seq      bigint NOT NULL
);

-- No batch is stored while the keys are copied: the copy and the constraint's removal are
-- one transaction, and an insert waits for it.
LOCK TABLE batches IN SHARE ROW EXCLUSIVE MODE;
INSERT INTO batch_keys (service_id, batch_id, seq) SELECT service_id, batch_id, seq FROM batches;
INSERT INTO ledger_batch_keys (batch_id, seq) SELECT batch_id, seq FROM batches WHERE ledger;

-- Every insert into batches, whoever writes it (ingest, the CLI, an application's own INSERT),
-- registers its pair first; a pair already registered makes the insert store nothing and
-- return no row, as ON CONFLICT DO NOTHING did on the unique constraint. A ledger batch then
-- registers its id; an id already registered (under any service_id) takes the pair back and
-- stores nothing. Two enqueues of one pair or one ledger id at once wait for each other on
-- the key, as on a unique index. The body names the schema, as batchclaim_head_in_flight does:
-- a SET clause would cost a configuration change at every insert.
DO $do$
BEGIN
    EXECUTE format($f$
CREATE FUNCTION batchclaim_batch_key() RETURNS trigger LANGUAGE plpgsql AS $b$
BEGIN
    INSERT INTO %1$I.batch_keys (service_id, batch_id, seq) VALUES (NEW.service_id, NEW.batch_id, NEW.seq)
    ON CONFLICT DO NOTHING;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    IF NEW.ledger THEN
        INSERT INTO %1$I.ledger_batch_keys (batch_id, seq) VALUES (NEW.batch_id, NEW.seq)
        ON CONFLICT DO NOTHING;
        IF NOT FOUND THEN
            DELETE FROM %1$I.batch_keys WHERE service_id = NEW.service_id AND batch_id = NEW.batch_id;
            RETURN NULL;
        END IF;
    END IF;
    RETURN NEW;
END
$b$$f$, current_schema());

-- A deleted batch (retention, an operator) frees its pair and its ledger id: the same
-- batch_id may be stored again, as before. A TRUNCATE of batches empties both tables. The
-- delete runs for each row, by its key: a statement-level delete joined to the deleted rows
-- was planned as a hash join over the whole key table once the tables were analyzed (100,000
-- keys read to free 5,000), which grows with every batch retention keeps.
    EXECUTE format($f$
CREATE FUNCTION batchclaim_drop_batch_keys() RETURNS trigger LANGUAGE plpgsql AS $b$
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        TRUNCATE %1$I.batch_keys, %1$I.ledger_batch_keys;
        RETURN NULL;
    END IF;
    DELETE FROM %1$I.batch_keys
    WHERE service_id = OLD.service_id AND batch_id = OLD.batch_id AND seq = OLD.seq;
    IF OLD.ledger THEN
        DELETE FROM %1$I.ledger_batch_keys WHERE batch_id = OLD.batch_id AND seq = OLD.seq;
    END IF;
    RETURN NULL;
END
$b$$f$, current_schema());
END
$do$;

CREATE TRIGGER batches_key BEFORE INSERT ON batches FOR EACH ROW
    EXECUTE FUNCTION batchclaim_batch_key();
CREATE TRIGGER batches_drop_keys AFTER DELETE ON batches
    FOR EACH ROW EXECUTE FUNCTION batchclaim_drop_batch_keys();
CREATE TRIGGER batches_truncate_keys AFTER TRUNCATE ON batches
    FOR EACH STATEMENT EXECUTE FUNCTION batchclaim_drop_batch_keys();

-- rolling-upgrade: upgrading from v0.1.0 stops every instance (the move into the schema), and no release since has run with this constraint; every insert goes through batches_key instead
ALTER TABLE batches DROP CONSTRAINT batches_service_id_batch_id_key;
