// Package migrations embeds the schema's golang-migrate files (NNNNNN_name.up.sql and
// .down.sql) and applies them through the iofs source and the pgx/v5 driver, so the daemon,
// the CLI and the tests migrate the same way.
package migrations
