// Package patroni runs a Patroni cluster for tests and the chaos suite: etcd (v3 API) and
// three Patroni members managing Postgres, from the installed programs (Debian packages
// patroni, etcd-server and postgresql), on free ports of 127.0.0.1 in a temporary directory.
// It installs nothing: Find names what is missing.
//
// The members run with synchronous_mode, strict (Options.Asynchronous turns it off, to show what is
// lost without it), use_pg_rewind, and short timings (ttl 10s, loop_wait 1s, retry_timeout
// 4s by default), so that a failover takes seconds. Start returns once one member leads and
// accepts writes and the others stream from it. URL lists every member in a multi-host URL
// with target_session_attrs=read-write: a client finds the leader whichever member it is.
//
// One cluster runs on a machine at a time: Start waits while another process's cluster runs
// (a lock on a file in the system's temp directory, released by Stop or by the process's
// death), since two clusters side by side on a small machine stretch failovers past the
// timings the tests and the chaos suite judge them by.
//
// Each member reaches etcd through a TCP proxy of its own (package tcpproxy), so that one
// member alone can be cut from the DCS; patronictl reaches etcd directly.
//
// The faults are those a real failover manager brings: KillPostmaster (a crash of the
// leader's Postgres; Patroni fails over at once, primary_start_timeout being 0),
// KillPatroni and StartPatroni (the manager dies and its Postgres runs on unmanaged until a
// supervisor restarts it), Switchover and Failover (patronictl), CutDCS and RestoreDCS (the
// leader cut from etcd demotes itself), StopEtcd and StartEtcd. A former leader rejoins as a
// replica through pg_rewind (Member.Rewinds counts them). WaitWritable returns the moment a
// new leader commits a write, which takeover bounds are measured from; WaitHealthy waits until
// the cluster is whole again.
//
// Patroni and Postgres refuse to run as root: when this process is root they run as the
// postgres user (else nobody), as package pglocal does. Every process gets SIGKILL when this
// process dies; a Postgres whose Patroni was killed is found by its postmaster.pid and killed
// by Stop.
package patroni
