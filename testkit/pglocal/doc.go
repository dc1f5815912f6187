// Package pglocal starts a throwaway Postgres cluster from the local server binaries
// (initdb, pg_ctl, postgres), for tests and the demo.
//
// Start runs initdb (trust authentication, superuser postgres) in a new temporary directory
// and starts the postmaster on a free port of 127.0.0.1 (FreePort: one below the kernel's
// ephemeral range, so no client connection's local port takes it before the server binds it
// or while a fault test has the server down), with its unix socket in that directory and
// durability switched off (fsync, synchronous_commit, full_page_writes), which is safe only
// because the data is thrown away. Stop shuts it down with pg_ctl stop -m fast and removes
// the directory; Restart stops and starts it on the same port and data, for fault tests.
// Options.Settings override the defaults (e.g. synchronous_commit=on) and Options.Port fixes
// the port.
//
// For failover tests a cluster can have a streaming replica: StartStandby copies it with
// pg_basebackup -R and starts the copy in standby mode; SetSynchronousStandbys and
// WaitStreaming make and check it a synchronous standby; Kill stops a server as a crash would
// and Promote makes the standby the primary. A new standby of the promoted server can take the
// old primary's port, so a client that lists both addresses in a multi-host URL with
// target_session_attrs=read-write always finds the primary.
//
// Postgres refuses to run as root. When this process is root, the cluster's directory is
// handed to the "postgres" user (else "nobody") and initdb, pg_ctl and postgres run as that
// user.
//
// The postmaster is a child of this process, in its own process group, and gets SIGQUIT when
// this process dies, so a test binary killed by -timeout leaves no server running.
package pglocal
