// Package node wires one instance together: the claim engine, the queuer, the submitter pool
// and the observer (recorder and status poller), plus an optional HTTP listener with
// /healthz, /readyz, /metrics and the ingest API. The `batchclaim run` daemon is a Node;
// a service that embeds the library creates one with its own Submitter.
//
// Stopping (ctx cancelled, e.g. on SIGTERM) follows DESIGN 4.6: the queuer stops handing out
// work, the poller stops, submissions already running may finish (bounded by the submit
// timeout), then the claims are released with an epoch check and the instance leaves the
// registry, so other instances take its service_ids on their next cycle.
package node
