package migrations

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/batchclaim/batchclaim/pgdb"
)

// lastInPublic is the newest version a release that kept its tables in public could have
// applied; those releases had migrations 1 to 11.
const lastInPublic = 11

// moveLock is the transaction advisory lock that serializes the preparation of the schema
// among instances and commands migrating at once.
const moveLock = 0x6261746368 // "batch"

// inPublicObjects are what migrations 1 to 11 created, by kind, as ALTER ... SET SCHEMA names
// them. Sequences owned by a column (serial ids) move with their table.
var inPublicObjects = []struct{ kind, name string }{
	{"TABLE", "batch_transitions"}, {"TABLE", "batches"}, {"TABLE", "claim_events"},
	{"TABLE", "election_events"}, {"TABLE", "election_members"}, {"TABLE", "election_terms"},
	{"TABLE", "failover_commands"}, {"TABLE", "failover_decision_nodes"},
	{"TABLE", "failover_decisions"}, {"TABLE", "failover_nodes"}, {"TABLE", "failover_roles"},
	{"TABLE", "failover_shards"}, {"TABLE", "heartbeat_config"},
	{"TABLE", "heartbeat_event_types"}, {"TABLE", "heartbeat_events"},
	{"TABLE", "heartbeat_sources"}, {"TABLE", "instances"}, {"TABLE", "owner_lock_events"},
	{"TABLE", "owner_locks"}, {"TABLE", "retention_state"}, {"TABLE", "service_halts"},
	{"TABLE", "service_id_claims"}, {"TABLE", "singleflight_entries"},
	{"TABLE", "submission_attempts"},
	{"VIEW", "batch_history"}, {"VIEW", "service_id_claims_effective"},
	{"SEQUENCE", "service_id_claim_epochs"}, {"SEQUENCE", "singleflight_epoch_seq"},
	{"FUNCTION", "batchclaim_finished_at()"},
	{"FUNCTION", "batchclaim_head_in_flight(text, uuid, bigint)"},
	{"FUNCTION", "batchclaim_notify_work()"},
	{"FUNCTION", "batchclaim_wake(text)"},
}

// prepare creates the schema when it is missing and moves an earlier release's tables out of
// public into it, in one transaction under an advisory lock, so that golang-migrate then finds
// its version table in the schema and goes on from the version found.
func prepare(ctx context.Context, databaseURL string, o options) error {
	conn, err := pgx.Connect(ctx, databaseURL)
	if err != nil {
		return fmt.Errorf("open database for migrations: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return pgdb.InTx(ctx, conn, pgx.TxOptions{}, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(moveLock)); err != nil {
			return err
		}
		var exists bool
		if err := tx.QueryRow(ctx, `SELECT to_regnamespace($1) IS NOT NULL`, pgx.Identifier{o.schema}.Sanitize()).Scan(&exists); err != nil {
			return err
		}
		// Checked first: CREATE SCHEMA IF NOT EXISTS needs CREATE on the database even when
		// the schema is there, which a role that only migrates may lack.
		if !exists {
			if _, err := tx.Exec(ctx, `CREATE SCHEMA `+pgx.Identifier{o.schema}.Sanitize()); err != nil {
				return fmt.Errorf("create schema %s: %w", o.schema, err)
			}
		}
		legacy, err := inPublic(ctx, tx, o.schema)
		if err != nil || !legacy {
			return err
		}
		return moveFromPublic(ctx, tx, o)
	})
}

func moveFromPublic(ctx context.Context, tx pgx.Tx, o options) error {
	version, dirty, _, err := readVersion(ctx, tx, "public")
	if err != nil {
		return fmt.Errorf("read public.schema_migrations: %w", err)
	}
	switch {
	case dirty:
		return fmt.Errorf("public.schema_migrations says migration %d failed half-way (dirty): finish or undo it with the release that ran it before moving the tables", version)
	case version == 0 || version > lastInPublic:
		return fmt.Errorf("public has batchclaim's tables but public.schema_migrations holds version %d, which no release with its tables in public had (1 to %d): it is not batchclaim's; move the tables by hand (docs/schema.md)", version, lastInPublic)
	}
	if o.onMove != nil {
		o.onMove(version)
	}
	schema := pgx.Identifier{o.schema}.Sanitize()
	for _, obj := range inPublicObjects {
		var found bool
		q := `SELECT to_regclass($1) IS NOT NULL`
		if obj.kind == "FUNCTION" {
			q = `SELECT to_regprocedure($1) IS NOT NULL`
		}
		if err := tx.QueryRow(ctx, q, "public."+obj.name).Scan(&found); err != nil {
			return err
		}
		if !found { // added by a migration after the version found
			continue
		}
		if _, err := tx.Exec(ctx, fmt.Sprintf("ALTER %s public.%s SET SCHEMA %s", obj.kind, obj.name, schema)); err != nil {
			return fmt.Errorf("move %s %s into %s: %w", obj.kind, obj.name, o.schema, err)
		}
	}
	table := pgx.Identifier{o.schema, VersionTable}.Sanitize()
	if _, err := tx.Exec(ctx, `CREATE TABLE `+table+` (version bigint NOT NULL PRIMARY KEY, dirty boolean NOT NULL)`); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `INSERT INTO `+table+` (version, dirty) VALUES ($1, false)`, int64(version)); err != nil {
		return err
	}
	// It was batchclaim's: golang-migrate keeps one version per table, so an application
	// cannot have shared it.
	if _, err := tx.Exec(ctx, `DROP TABLE public.schema_migrations`); err != nil {
		return errors.Join(errors.New("drop public.schema_migrations"), err)
	}
	return nil
}
