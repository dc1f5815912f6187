// Package migrations embeds the schema's golang-migrate files (NNNNNN_name.up.sql and
// .down.sql) and applies them through the iofs source and the pgx/v5 driver, so the daemon,
// the CLI and the tests migrate the same way.
//
// Each migration runs as one transaction and waits at most LockTimeout at a time for the
// locks it needs: one that meets a long transaction on its table is rolled back and tried
// again, instead of holding every other statement on that table behind its lock request for
// as long (docs/compatibility.md, "Rolling upgrades").
package migrations
