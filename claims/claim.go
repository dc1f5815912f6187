package claims

import (
	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/internal/pg"
)

// Claim is a service_id this instance holds, with the epoch of its acquisition (the
// vocabulary's batchclaim.Claim; its Context is cancelled when the claim is lost).
type Claim = batchclaim.Claim

// LossReason says why a claim was lost.
type LossReason string

const (
	// LossTaken: the database no longer lists the claim as ours (voided or taken by another).
	LossTaken LossReason = "taken"
	// LossFenced: a fenced write found the epoch stale.
	LossFenced LossReason = "fenced"
	// LossDeadline: no renewal succeeded before the local deadline; we fenced ourselves.
	LossDeadline LossReason = "deadline"
	// LossReleased: we gave the claim back (graceful stop or fair-share surplus).
	LossReleased LossReason = "released"
	// LossDropped: we deleted the claim row of an idle service_id (Config.DropIdleAfter).
	LossDropped LossReason = "dropped"
)

// Querier runs statements: a *pgxpool.Pool, a *pgx.Conn or a pgx.Tx. It is the project's
// one Querier, named here for the packages and embedders that pass one to the claim engine,
// the observer or the ingest API.
type Querier = pg.Querier

// Pool is a Querier that can also start transactions, such as *pgxpool.Pool: the project's
// one Beginner.
type Pool = pg.Beginner

// InSchema returns pool with batchclaim's tables in schema instead of the default, batchclaim
// (for a database migrated with migrations.InSchema): pass the result wherever the library
// asks for a Pool or a Querier. The engine's own lease connection follows it. With "" or
// "batchclaim" it returns pool itself. See docs/schema.md.
func InSchema(pool Pool, schema string) Pool { return pg.InSchema(pool, schema) }

// QuerierInSchema is InSchema for a Querier that starts no transactions, such as the pgx.Tx
// of an application's transaction that enqueues.
func QuerierInSchema(q Querier, schema string) Querier { return pg.QuerierInSchema(q, schema) }
