-- Back to the rule of migration 21: one BEFORE INSERT OR UPDATE row trigger.
DROP TRIGGER batches_finished_at_update ON batches;
DROP FUNCTION batchclaim_finished_at_update();
DROP TRIGGER batches_finished_at ON batches;
CREATE TRIGGER batches_finished_at BEFORE INSERT OR UPDATE ON batches FOR EACH ROW
    WHEN ((NEW.state = ANY ('{COMMITTED,INVALID,DISCARDED,CANCELLED}'::text[])) <> (NEW.finished_at IS NOT NULL)
          OR NEW.unfinished IS DISTINCT FROM (NEW.finished_at IS NULL))
    EXECUTE FUNCTION batchclaim_finished_at();
