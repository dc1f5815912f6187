// Package node wires one instance together: the claim engine, the queuer, the submitter pool
// and the observer (recorder and status poller), plus an optional HTTP listener with
// /healthz, /readyz, /metrics and the ingest API. The `batchclaim run` daemon is a Node;
// a service that embeds the library creates one with its own Submitter.
//
// The listener can serve HTTPS (Config.TLSCertFile, TLSKeyFile), put an authentication
// middleware in front of every route (Config.Auth, e.g. bearer tokens from internal/httpauth),
// and bounds what a client can hold: the time to read a request and its headers, the header
// size, and the ingest requests served at once (one more is answered 503 with Retry-After).
// StopBudget says how long a stop can take, for a supervisor's kill timeout.
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
// Stopping (ctx cancelled, e.g. on SIGTERM) follows DESIGN 4.6: the queuer stops handing out
// work, the poller stops, submissions already running may finish (bounded by the submit
// timeout), then the claims are released with an epoch check and the instance leaves the
// registry, so other instances take its service_ids on their next cycle.
package node
