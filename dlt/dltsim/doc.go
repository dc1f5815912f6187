// Package dltsim simulates the two ledger HTTP APIs package dlt speaks, the Sawtooth REST API
// and a Splinter scabbard service, closely enough that tests against it mean something. It
// runs in-process on a loopback port (Sim.Start) or as the command `batchclaim dlt-sim`
// (Command).
//
// # The ledger model
//
// A POSTed BatchList is checked the way the real API checks it (Content-Type, an empty or
// undecodable body, batch ids, SplinterProtocolVersion, an optional Authorization value) and
// each new batch is queued as PENDING. Batches leave the queue in arrival order: a batch
// settles once CommitLatency has passed since it arrived and every batch before it has
// settled. It settles COMMITTED, or INVALID for the fraction InvalidRate of batches (chosen
// deterministically from Seed and the batch id, so the same batch is always invalid). On
// scabbard a batch is first executed, halfway through CommitLatency, and reports VALID (or
// INVALID) until it commits. Time is evaluated lazily on every request or method call, with
// Config.Now as the clock, so a test can move time by hand.
//
// Batches are deduplicated by id: re-posting a batch the ledger knows (queued, committed, or
// remembered INVALID) is answered 202 and changes nothing. On scabbard a re-post of a batch
// that is on the chain but was evicted from the history brings it back as Committed.
//
// # Memory
//
// Sawtooth: COMMITTED persists; INVALID is remembered for InvalidMemory (600 s) and is
// UNKNOWN afterwards; PENDING is lost on Restart. Scabbard: statuses come from an in-memory
// history of the last HistoryLimit (100) batches, so an evicted batch, or any batch after
// Restart, answers Unknown; the chain itself (Sim.Committed) survives a restart, and pending
// batches lost by a restart never commit.
//
// # Back-pressure and faults
//
// The queue applies hysteresis: once QueueHigh batches are queued every POST answers 429
// until fewer than QueueLow remain. SetPaused stops settling so the queue fills, and
// CommitNext settles a given number of batches by hand. InjectStatus, InjectTimeouts and
// InjectDroppedResponses make the next POSTs fail: with a status code (not accepted), with no
// answer at all (not accepted), or with a closed connection after the batches were accepted.
//
// # Recording and administration
//
// Every POST is recorded (Posts), one record per batch, with its effect. The handler also
// serves an admin API under /_sim/: GET /_sim/posts, GET /_sim/committed, POST /_sim/restart,
// POST /_sim/inject?status=503&n=3, POST /_sim/inject?timeout=2s&n=1, POST /_sim/inject?drop=1,
// POST /_sim/pause?on=true|false and POST /_sim/commit?n=N. InjectError makes a status carry a
// chosen Sawtooth code (503 with 17: the validator timed out and the outcome is unknown, and
// in the simulator the batch was in fact accepted;
// POST /_sim/inject?status=503&code=17&n=3); ClearFaults (POST /_sim/inject?clear=true) cancels
// what is left; Settled (GET /_sim/settled) lists every batch that left the queue, COMMITTED
// or INVALID, with its place among the POSTs.
package dltsim
