// Package ingest stores batches for the pipeline: the Enqueue library calls, which run in
// the caller's own transaction when given one (so a service can store a batch atomically with
// its own data), and the Grid-style HTTP API:
//
//	POST /batches?service_id=S       body: a BatchList (application/octet-stream)
//	GET  /batch_statuses?id=ID1,ID2  answers in the Sawtooth REST API's shape, from the database
//	POST /batch_statuses             body: a JSON array of ids; same answer without a link
//
// Storing is idempotent on (service_id, batch id): the same batch posted twice is stored
// once and keeps its place in the order. A BatchList holding several batches is stored as one
// row per batch, in list order, each row's payload a BatchList of that one batch. Bad input
// (wrong content type, empty, undecodable or oversized body, bad or missing service_id,
// unknown query parameters) gets a 4xx with a JSON error and stores nothing.
package ingest
