// Package dlt speaks to the distributed ledgers a batch is submitted to: the Sawtooth REST
// API and a Splinter scabbard service. It holds three things.
//
// BatchList helpers. A payload is a serialized protobuf BatchList (field 1: repeated Batch; a
// Batch has header (1), header_signature (2, the batch id: 128 lowercase hex characters),
// transactions (3) and trace (4)). SplitBatchList walks the wire format with protowire and
// returns one single-batch BatchList per batch, so every batch can be tracked on its own.
// SplitBatchListNoTransactionIDs does the same without copying the transactions' ids, and
// SplitBatchListMemory bounds what it allocates, whatever the payload holds, so that a server
// can reserve that before decoding (a list of tiny batches costs about 3.2 x its size). The
// concatenation of serialized BatchLists is itself a BatchList, so one-batch lists can be
// joined by appending their bytes. FakeBatch builds deterministic, syntactically valid
// batches for tests and demos; FakeBatchService reads back the service id it put in the
// header.
//
// Clients. Client is what the submitter and the observer use, directly: it is a
// submitter.Submitter and an observer.StatusWaiter. Post (and Submit, for a batch whose
// payload is a BatchList) sends one BatchList and classifies the answer in the shared
// vocabulary of package batchclaim; Statuses asks for the status of a set of batch ids and
// answers with batchclaim.LedgerStatus values. A Post never returns an error for an HTTP or transport
// failure; its PostResult (a batchclaim.Result and the status link) carries the verdict:
//
//   - batchclaim.Accepted: 200 or 202; the ledger has the batch (PostResult.Link is the status
//     link).
//   - batchclaim.Rejected: 400, 413 (too large) or 422 (unprocessable); the batch itself is at
//     fault and must not be sent again.
//   - batchclaim.Retry: an answer that proves the batch was not taken: 429, a Sawtooth 503
//     with code 15 (validator not ready), a refused connection or a failed handshake before
//     the request was written, and the other 4xx codes (401, 403, 404, ...), which are not
//     Rejected because the batch is not at fault: they point at configuration, and the client
//     logs a warning about them (at most one every 10 seconds).
//   - batchclaim.Unknown: the POST may have taken effect although no usable answer arrived: a
//     timeout or a dropped connection after the request was written, a 408, any other 503, a
//     500, 502, 504 or other 5xx. The ledger is asked before the batch is posted again; a
//     re-post is then a harmless duplicate, as both ledgers dedupe by batch id.
//
// RetryAfter carries a Retry-After header when one was sent.
//
// Sawtooth reports PENDING, INVALID, COMMITTED or UNKNOWN; Statuses sends at most 15 ids per
// GET /batch_statuses and runs the groups with bounded concurrency. Scabbard also reports
// VALID (executed, not yet committed); OrderedOnValid is false for it too, because a restart
// of the node forgets a VALID batch and only COMMITTED fixes a batch's place. For
// both flavours an id the ledger did not mention is reported UNKNOWN, and an id the ledger
// mentions without having been asked is an error (the answer cannot be trusted).
// StatusesWait sends both APIs' wait parameter (whole seconds, rounded up): the ledger holds
// its answer until no asked batch is left unsettled (Sawtooth: none PENDING; scabbard: each
// COMMITTED or INVALID) or the wait has passed, and the request's timeout allows for it.
//
// The simulator in dlt/dltsim reproduces both APIs, including their faults, for tests.
package dlt
