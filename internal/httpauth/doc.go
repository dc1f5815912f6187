// Package httpauth guards the HTTP listener with bearer tokens read from a file.
//
// The token file holds one token per line; blank lines and lines starting with # are
// ignored, and spaces around a token are trimmed. LoadTokens reads it; Reload reads it again
// (the run command calls it on SIGHUP) and swaps the set atomically, so requests in flight
// see either the old set or the new one. A reload that fails (unreadable file, no tokens)
// keeps the old set and returns the error.
//
// Middleware demands "Authorization: Bearer <token>" on:
//
//   - every request whose method is not GET or HEAD (every state-changing request);
//   - the ingest API: POST /batches and GET /batch_statuses;
//   - any GET or HEAD of a path not listed below (unknown paths are closed by default).
//
// It leaves GET and HEAD of these read-only paths open: /healthz, /readyz, /metrics, and
// the status page's /, /assets/... and /api/.... Paths are cleaned before they are matched,
// so /api/../batch_statuses is the ingest API, not the status page.
//
// A request without a valid token gets 401 with a WWW-Authenticate header and a body in the
// Sawtooth REST API's error shape, {"error":{"code":80,"title":"Unauthorized","message":...}}.
// Tokens are compared as SHA-256 digests with crypto/subtle, so the time taken depends neither
// on how much of a token matched nor on its length, and the tokens themselves are never logged
// or kept in memory after loading. See docs/operations.md, "Authentication, TLS and limits".
package httpauth
