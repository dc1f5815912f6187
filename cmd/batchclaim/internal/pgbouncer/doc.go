// Package pgbouncer runs Debian's pgbouncer (1.18) in front of a Postgres server for tests:
// on a free port of 127.0.0.1, in transaction or session pooling mode, with trust
// authentication and every database name passed through to the server. It installs nothing:
// Find names the missing package.
//
// It accepts only the startup parameters pgbouncer itself tracks (application_name,
// client_encoding, DateStyle, TimeZone, standard_conforming_strings) and refuses a client
// that sends another (lock_timeout, say), as production poolers do. In transaction mode a
// server connection serves a client for one transaction only: server-side named prepared
// statements, session settings, session advisory locks and LISTEN do not carry over to the
// client's next transaction. docs/operations.md ("Behind PgBouncer") says how the daemon is
// run through it.
//
// pgbouncer refuses to run as root: when this process is root it runs as the postgres user
// (else nobody), as package pglocal does, and gets SIGKILL when this process dies.
package pgbouncer
