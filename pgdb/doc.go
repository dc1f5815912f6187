// Package pgdb is batchclaim's one seam to Postgres, public so that an application passes its
// own pool, connection or transaction to every part of the library the same way:
//
//   - DB is the database a part of the library works in: a pool and the schema of batchclaim's
//     tables, made once by Open(pool, schema). Every constructor of the library takes one; a
//     DB runs statements and starts transactions in its schema, In moves a caller's own
//     transaction there, and Pool gives the pool for what only a pool does (a connection of
//     one's own for LISTEN or a lease).
//   - Querier runs statements (a *pgxpool.Pool, a *pgx.Conn or a pgx.Tx) and Beginner also
//     starts transactions (a *pgxpool.Pool or a *pgx.Conn). The functions that work inside
//     a caller's transaction take one of the two.
//   - InSchema and QuerierInSchema move every statement to a schema of the application's
//     choosing (ValidateSchema checks its name); SchemaOf tells it back. See docs/schema.md.
//   - InTx is the one transaction helper; GuardTx bounds a transaction's lock waits and how long
//     the server keeps it open while its client is silent.
//   - ConfigureTypes (on a pool's config) and RegisterTypes (on a connection's type map) have
//     pgx send and read uuid.UUID, the library's identifiers, as its 16 bytes instead of
//     through text; claims.ConfigurePool calls ConfigureTypes.
//   - Code, Conflict, LockTimeout, UndefinedTable, PermissionDenied and Retryable are the
//     predicates on SQLSTATEs the library acts on; NoRows and NotFound are the one place that
//     knows pgx.ErrNoRows.
//
// The statements themselves are generated code inside the library (internal/db) and never
// appear in an exported signature.
package pgdb
