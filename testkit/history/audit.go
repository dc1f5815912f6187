package history

import (
	"context"
	"fmt"

	"github.com/batchclaim/batchclaim/pgdb"
)

// AuditSchema is the schema of the tables InstallAudit creates.
const AuditSchema = "history_audit"

// auditDDL records what the pipeline's own history cannot tell afterwards. Retention
// deletes finished batches with their attempts and transitions: every batch row deleted is
// kept here as it was when deleted, with the rows that went with it, each with the
// transaction that wrote it (wrote: its xmin, whose commit time the checks read). And the
// attempt log has no attempt numbers: each change of a batch row's attempt count is kept,
// so that the number each in-flight mark drew (and a count set back) can be read. The
// triggers run inside the writing transactions, so a record commits exactly when what it
// records does, and at is the now() of that transaction, the clock of every other time the
// checks read.
const auditDDL = `
CREATE SCHEMA IF NOT EXISTS history_audit;
CREATE TABLE IF NOT EXISTS history_audit.deleted_batches (
    seq   bigint      NOT NULL,
    rec   jsonb       NOT NULL,
    wrote xid         NOT NULL,
    at    timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS history_audit.deleted_history (
    tbl   text   NOT NULL,
    seq   bigint NOT NULL,
    rec   jsonb  NOT NULL,
    wrote xid    NOT NULL
);
CREATE TABLE IF NOT EXISTS history_audit.attempt_counts (
    id        bigserial   PRIMARY KEY,
    seq       bigint      NOT NULL,
    old_count integer     NOT NULL,
    new_count integer     NOT NULL,
    at        timestamptz NOT NULL DEFAULT now()
);
CREATE OR REPLACE FUNCTION history_audit.batch_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO history_audit.deleted_batches (seq, rec, wrote) VALUES (OLD.seq, to_jsonb(OLD) - 'payload', OLD.xmin);
    RETURN NULL;
END
$$;
CREATE OR REPLACE FUNCTION history_audit.history_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO history_audit.deleted_history (tbl, seq, rec, wrote) VALUES (TG_TABLE_NAME, OLD.seq, to_jsonb(OLD), OLD.xmin);
    RETURN NULL;
END
$$;
CREATE OR REPLACE FUNCTION history_audit.attempts_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO history_audit.attempt_counts (seq, old_count, new_count) VALUES (NEW.seq, OLD.attempts, NEW.attempts);
    RETURN NULL;
END
$$;
DROP TRIGGER IF EXISTS history_audit_deleted ON batchclaim.batches;
CREATE TRIGGER history_audit_deleted AFTER DELETE ON batchclaim.batches
    FOR EACH ROW EXECUTE FUNCTION history_audit.batch_deleted();
DROP TRIGGER IF EXISTS history_audit_deleted ON batchclaim.batch_transitions;
CREATE TRIGGER history_audit_deleted AFTER DELETE ON batchclaim.batch_transitions
    FOR EACH ROW EXECUTE FUNCTION history_audit.history_deleted();
DROP TRIGGER IF EXISTS history_audit_deleted ON batchclaim.submission_attempts;
CREATE TRIGGER history_audit_deleted AFTER DELETE ON batchclaim.submission_attempts
    FOR EACH ROW EXECUTE FUNCTION history_audit.history_deleted();
DROP TRIGGER IF EXISTS history_audit_attempts ON batchclaim.batches;
CREATE TRIGGER history_audit_attempts AFTER UPDATE OF attempts ON batchclaim.batches
    FOR EACH ROW WHEN (OLD.attempts IS DISTINCT FROM NEW.attempts) EXECUTE FUNCTION history_audit.attempts_changed();
`

// InstallAudit creates the audit tables and triggers (schema history_audit) in a migrated
// database, for ReadJobs and Check to read: every batch retention deletes, with its attempts
// and transitions, and every change of a batch's attempt count. A harness installs it
// before the first batch is stored; it is idempotent. It is a test fixture: it adds a row
// write to every in-flight mark.
func InstallAudit(ctx context.Context, q pgdb.Querier) error {
	if _, err := q.Exec(ctx, auditDDL); err != nil {
		return fmt.Errorf("install history audit: %w", err)
	}
	return nil
}

// audited reports whether InstallAudit ran on the database.
func audited(ctx context.Context, q pgdb.Querier) (bool, error) {
	var ok bool
	if err := q.QueryRow(ctx, `SELECT to_regclass('history_audit.deleted_batches') IS NOT NULL`).Scan(&ok); err != nil {
		return false, fmt.Errorf("look for the history audit: %w", err)
	}
	return ok, nil
}
