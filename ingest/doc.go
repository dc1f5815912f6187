// Package ingest stores batches for the pipeline: the Enqueue library calls, which run in
// the caller's own transaction when given one (so a service can store a batch atomically with
// its own data), and the Grid-style HTTP API:
//
//	POST /batches?service_id=S       body: a BatchList (application/octet-stream)
//	GET  /batch_statuses?id=ID1,ID2  answers in the Sawtooth REST API's shape, from the database
//	POST /batch_statuses             body: a JSON array of ids; same answer without a link
//
// EnqueueMany stores many jobs of many service_ids in one statement, each service_id's in the
// order given, all or nothing. An enqueue given a pool is a transaction of its own and wakes
// the holder of its service_id just after its commit; one in the caller's transaction, when
// that transaction commits.
//
// Storing is idempotent on (service_id, batch id): the same batch posted twice is stored
// once and keeps its place in the order. A BatchList holding several batches is stored as one
// row per batch, in list order, each row's payload a BatchList of that one batch. Bad input
// (wrong content type, empty, undecodable or oversized body, bad or missing service_id,
// unknown query parameters) gets a 4xx with a JSON error and stores nothing. A service_id
// must pass batchclaim.ValidateServiceID (valid UTF-8 in Unicode NFC, visible characters
// only). The log lines a client can cause (failed stores and status reads, refusals it can
// repeat) go through a throttle (httpguard.Throttle): a line, then a count every 10s.
//
// The 202 answer is {"link": URL} as the Sawtooth REST API gives it. A link holds at most
// MaxStatusIDs ids and MaxLinkLen bytes; a list with more batches gets
// {"link": first, "links": [every link, in list order]}, so that every link works. Links
// start with Config.BaseURL, else with the request's Host once a listener guard checked it,
// else they are relative: never built from a Host header nothing checked.
//
// What a client can make the API hold is bounded, whatever it sends:
//
//   - Memory (Config.MaxMemory): a body is read into a buffer that grows only as its bytes
//     arrive, each buffer reserved from the budget before it is allocated; once the body is
//     in, what decoding it allocates is reserved before decoding starts
//     (dlt.SplitBatchListMemory): the batches' copy of the body and, per batch, its id and
//     bookkeeping, about 300 bytes, so a list of the smallest batches (134 bytes each)
//     reserves about 3.2 x its body on top of it. A request that cannot reserve is answered
//     503 with Retry-After at once, or 413 if it could not even alone. The budget, not the
//     number of clients or what they send, bounds the bodies and batches held;
//     docs/operations.md gives the instance's worst case as a formula.
//   - Work (Config.MaxRequests): a request takes one of these places only once its body has
//     arrived, so clients that send slowly (bounded by the server's read timeout) hold none.
//   - Connections (Config.MaxConns): the API holds at most this many of the pool's
//     connections; requests of one service_id wait for each other in the process, without a
//     connection, since the database would serialize them anyway (Config.MaxWait bounds both
//     waits, then 503 with Retry-After).
//
// Errors carry the request id of a listener guard, and log lines of a request carry it as
// request_id. A 409 (a batch id stored under another service_id) does not name that
// service_id to the client; the log does.
package ingest
