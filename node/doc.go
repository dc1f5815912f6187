// Package node wires one instance together: the claim engine, the queuer, the submitter pool
// and the observer (recorder and status poller), plus an optional HTTP listener with
// /healthz, /readyz, /metrics and the ingest API. The `batchclaim run` daemon is a Node;
// a service that embeds the library creates one with its own Submitter.
//
// The listener can serve HTTPS (Config.TLSCertFile, TLSKeyFile) and put an authentication
// middleware in front of every route (Config.Auth: any func(http.Handler) http.Handler, such
// as a bearer-token check; the daemon's --auth-token-file installs one).
// In front of both sits the guard of httpguard: a request id in every answer and log
// line, a Host check against the names the listener answers to (Config.AllowedHosts; a
// defence against DNS rebinding) and the refusal of cross-origin state-changing requests.
//
// What a client can make the instance hold is bounded by design (see Config.MemoryBound and
// docs/operations.md, "Memory"): the open connections (Config.MaxConnections), the time to
// read a request and its headers, the header size, the bytes of ingest bodies and their
// decoded batches (Config.MaxIngestMemory), and the ingest requests worked on
// (Config.MaxIngestRequests), counted only once a body has arrived so that slow clients hold
// none; beyond a limit the answer is 503 with Retry-After. The ingest API holds at most
// IngestConns of the pool's connections; the scrape-time metrics and the status page read on
// ProbeConns connections of their own, so that neither ingest nor the workers can make them
// wait. /readyz costs no round trip: the listener pings the database every ReadinessInterval
// on a connection of its own (ReadinessConns), and /readyz answers 200 while a ping was
// answered within ReadinessWindow and the lease is live, so that a flood of probes costs the
// database nothing and one slow answer does not take the instance out of its load balancer.
// StopBudget says how long a stop can take, for a supervisor's kill timeout.
//
// Besides the work's metrics, /metrics has batchclaim_build_info and the statistics of the
// pools (the node's, the probe pool and the readiness pings'). Config.Pprof adds the
// runtime's profiles under /debug/pprof/, behind Config.Auth. The library's OpenTelemetry
// spans (internal/tracing) go to the global tracer provider, a no-op unless the program
// installs one. See docs/observability.md.
//
// A node listens for new work (LISTEN/NOTIFY) on a connection of its own: a batch stored for
// a service_id it holds, by any instance, the CLI or an embedder's own INSERT, reaches its
// queuer within milliseconds of the commit, and a batch of a service_id nobody holds yet
// wakes its claim cycle. The connection is made again with backoff when it fails, and every
// held claim is looked at then, so a missed notification delays work, never loses it.
// Config.NoListen turns listening off (behind a pooler in transaction mode, where LISTEN does
// not work, without a direct Config.ListenConnString): the queuer then looks at every held
// claim each renew interval. See docs/operations.md.
//
// Stopping (ctx cancelled, e.g. on SIGTERM; docs/failure-paths.md, "Graceful stop"): the
// queuer stops handing out work, the poller stops, submissions already running may finish
// (bounded by the submit timeout), then the claims are released with an epoch check and the instance leaves the
// registry, so other instances take its service_ids on their next cycle.
//
// Wiring: New builds the parts in dependency order, each given the parts it needs, built
// before it: the metrics, the claim engine, the recorder (on the engine), the submitter pool
// (on the recorder), the queuer (on the engine, the pool and the recorder), the status poller,
// the canceller (on the pool), the waker (on the engine, the queuer and the canceller), the
// periodic scheduler and the retention job. One edge points back: the hooks of the engine
// (a claim gained, the progress check before each lease renewal), of the recorder (an outcome
// stored, a state changed) and of the pool (a job over, may the next job of its service_id
// follow it) tell the queuer and the poller, built after them. Those hooks are the methods of
// one value, the back edge (wiring.go), which New connects to the queuer, the poller and the
// pool, through interfaces naming what the hooks need of them, once they exist; no hook runs
// before Run.
//
// A node works in the pgdb.DB given to New: its pool (or, unless Config.SharePool, a pool
// made with that pool's settings) and its schema, the one migrations.Up was given.
//
// A zero Config field means what the run command's flag of the same name defaults to
// (Config.Resolve returns the values a node works with), so an embedded node and the daemon
// behave alike; Retention, for
// one, is 7 days unless set (negative disables it). Listen is the exception: empty serves no
// HTTP, where run listens on 127.0.0.1:8080.
package node
