// Package ui is the live status page of a batchclaim deployment: one HTML page, a stylesheet
// and a small script, embedded in the binary (no build step, nothing loaded from elsewhere,
// so it works offline), over a JSON API that reads the shared database.
//
// Every instance serves it on its listener at / (see package node), and `batchclaim ui
// --listen ADDR` serves it without running an instance. Because everything comes from the
// database, any instance's page shows the whole fleet:
//
//   - instances with their lease phase (live, expiry_1_passed, expired) and heartbeat age;
//   - claims per instance, one bar each, against the fair share;
//   - service_ids with unfinished batches, oldest first, with their owner;
//   - state changes of batches over the last minutes, as a small stacked chart;
//   - the newest transitions and takeovers (claims freed from an instance whose lease ran out);
//   - halted service_ids (after an INVALID batch with halt-on-invalid), each with a button
//     that resumes it.
//
// Beside that overview, a job view (reached from the search box in the page's header) shows:
//
//   - a search: ledger batches by id or a prefix of at least 8 hex digits, any batch by #seq,
//     service_ids by name or its start;
//   - a service_id's page: owner, epoch and claim phase, its halt with a Resume button, its
//     queue of unfinished batches in send order (keyset pages), its owner and epoch history
//     from the claim log;
//   - the periodic jobs (package periodic): schedule, key, last tick and its job, next run;
//   - a batch's page: its attempts (HTTP status, latency, outcome, error, instance, epoch), its
//     transitions in order, the ledger's invalid details, and Retry and Cancel buttons where the
//     batch's state allows them;
//   - a list of the batches changed within a time window of up to 30 days, filtered by state
//     and service_id, in keyset pages.
//
// Each has a JSON API (see Handler.Register) whose parameters are checked and bounded: a bad
// one is answered 400 saying what is wrong, an unknown batch or service_id 404, and no request
// reads more than a few hundred rows. docs/status-page.md describes the views and the API.
//
// The page polls GET /api/status every Config.Refresh and redraws without a reload. Answers
// are reused for half that interval, so many open pages cost the database no more than one,
// and every query is bounded (the partial index over unfinished batches, the newest rows of
// the append-only logs), so a large history does not make the page expensive.
//
// The writes are POST /api/halts/{service_id}/resume (observer.Resume) and POST
// /api/batches/{seq}/retry and /cancel (observer.Retry, observer.Cancel: 409 when the batch's
// state does not allow it; a cancel of a running batch answers "cancel_requested": its job is
// asked to stop, and it ends CANCELLED once it returns); a service_id that batchclaim.ValidateServiceID refuses, or a seq
// that is not a positive integer, is answered 400. The handler does not authenticate
// itself: mount it behind the listener's authentication middleware, which leaves the page
// and its assets open but asks a token for its data (it names service_ids and batch ids, as
// the ingest API does) and for the resume. The page lets the operator type a token, keeps it
// in the tab's sessionStorage, sends it as "Authorization: Bearer ..." on its reads and on
// the resume, and says so plainly when the answer is 401. A browser POST from another origin
// is refused (403), so that a page elsewhere cannot make an operator's browser resume a
// service_id on a listener without authentication.
//
// A read that fails answers 503 without the database's error (which names the database and
// its user). Its log line goes through a throttle (httpguard.Throttle): the first in full,
// then a count every 10s while failures go on, so that any number of requests during an
// outage write a few lines; the status read also says once when reads work again. A write
// the database refuses to the page's role (SQLSTATE 42501: the read-only role of
// deploy/roles.sql) answers 403 naming the missing grant, not 503.
package ui
