// Package dlt speaks to the distributed ledgers a batch is submitted to: the Sawtooth REST
// API and a Splinter scabbard service. It holds three things.
//
// BatchList helpers. A payload is a serialized protobuf BatchList (field 1: repeated Batch; a
// Batch has header (1), header_signature (2, the batch id: 128 lowercase hex characters),
// transactions (3) and trace (4)). SplitBatchList walks the wire format with protowire and
// returns one single-batch BatchList per batch, so every batch can be tracked on its own. The
// concatenation of serialized BatchLists is itself a BatchList, so one-batch lists can be
// joined by appending their bytes. FakeBatch builds deterministic, syntactically valid
// batches for tests and demos; FakeBatchService reads back the service id it put in the
// header.
//
// Clients. Client is what the submitter and the observer use: Post sends one BatchList and
// classifies the answer as a Verdict, Statuses asks for the status of a set of batch ids. A
// Post never returns an error for an HTTP or transport failure; those become
//
//   - Accepted: 200 or 202; the ledger has the batch (PostResult.Link is the status link).
//   - Rejected: 400; the batch itself is at fault and must not be sent again.
//   - Retry:    429, 503, 408, 500 and every other status, connection errors, timeouts and
//     dropped responses. RetryAfter carries a Retry-After header when one was sent.
//
// PostResult.Unknown is set when the POST may have taken effect although no usable answer
// arrived (a timeout or a dropped connection after the request was written, a 500, 502 or
// 504). A later re-post of the same batch is then a harmless duplicate: both ledgers dedupe
// by batch id. Other 4xx codes (401, 403, 404, ...) are Retry rather than Rejected because the
// batch is not at fault: they point at configuration.
//
// Sawtooth reports PENDING, INVALID, COMMITTED or UNKNOWN; Statuses sends at most 15 ids per
// GET /batch_statuses and runs the groups with bounded concurrency. Scabbard also reports
// VALID (executed, order fixed, not yet committed), which is why OrderedOnValid differs. For
// both flavours an id the ledger did not mention is reported UNKNOWN, and an id the ledger
// mentions without having been asked is an error (the answer cannot be trusted).
//
// The simulator in dlt/dltsim reproduces both APIs, including their faults, for tests.
package dlt
