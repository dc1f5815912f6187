// Package httpauth guards the HTTP listener with bearer tokens read from a file.
//
// The token file holds one token per line, of any length; blank lines and lines starting
// with # are ignored, and spaces around a token are trimmed. LoadTokens reads it; Reload
// reads it again (the run command calls it on SIGHUP) and swaps the set atomically, so
// requests in flight see either the old set or the new one. A file with no token gives the
// empty set: every request that needs a token is refused, which is how every token is
// revoked at once. A reload that fails (the file cannot be read, or is over MaxFileSize)
// keeps the old set and returns the error. Problems lists what the operator should be told
// about the file as loaded: no token in it, or every user of the machine allowed to read it.
//
// Middleware demands "Authorization: Bearer <token>" on:
//
//   - every request whose method is not GET or HEAD (every state-changing request);
//   - the ingest API: POST /batches and GET /batch_statuses;
//   - any GET or HEAD of a path not listed below (unknown paths are closed by default).
//
// It leaves GET and HEAD of these read-only paths open: /healthz, /readyz, /metrics, and
// the status page's / and /assets/... (its HTML and script, which hold no data). The page's
// data, /api/..., names service_ids and batch ids as the ingest API does and needs a token
// like it. Paths are cleaned before they are matched, so /assets/../batch_statuses is the
// ingest API, not the status page.
//
// A request without a valid token gets 401 with a WWW-Authenticate header and a body in the
// Sawtooth REST API's error shape, {"error":{"code":80,"title":"Unauthorized","message":...}}.
// Tokens are compared as SHA-256 digests with crypto/subtle, so the time taken depends neither
// on how much of a token matched nor on its length, and the tokens themselves are never logged
// or kept in memory after loading. See docs/operations.md, "Authentication, TLS and limits".
package httpauth
