// Package httpauth guards the HTTP listener with bearer tokens read from a file, each with
// the scopes of what it may do.
//
// The token file holds one token per line, with its scopes:
//
//	# token                                                            scopes
//	6f1c0c1e9e3a4d5b8a7f0e2d3c4b5a69788766554433221100ffeeddccbbaa99  scopes=ingest
//	0a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f9  scopes=read,operate
//
// The scopes (Scope) are ingest (POST /batches, GET and POST /batch_statuses), read (the
// status page's data, GET /api/...), operate (the status page's writes: resume, retry,
// cancel) and debug (the profiles under /debug/pprof/); "all" names every one. A token of
// any length holds no space; blank lines, lines starting with # and a # after the scopes are
// ignored. A line with the token alone (the file's old form) gives it every scope, and
// Problems says so, so that the operator hears it at start and at each reload. A line of
// another shape, or an unknown scope, makes the whole file refused, naming the line.
//
// LoadTokens reads the file; Reload reads it again (the run command calls it on SIGHUP) and
// swaps the set atomically, so requests in flight see either the old set or the new one. A
// file with no token gives the empty set: every request that needs a token is refused,
// which is how every token is revoked at once. A reload that fails keeps the old set and
// returns the error. Problems lists what the operator should be told about the file as
// loaded: no token in it, every user of the machine allowed to read it, tokens without
// scopes.
//
// Middleware demands "Authorization: Bearer <token>" with a token of the scope the request
// needs (Needs) on every request but GET and HEAD of these read-only paths: /healthz,
// /readyz, /metrics, and the status page's / and /assets/... (its HTML and script, which
// hold no data). A path no scope names needs every scope (closed by default). Paths are
// cleaned before they are matched, so /assets/../batch_statuses is the ingest API, not the
// status page.
//
// A request without a valid token gets 401 with a WWW-Authenticate header and a body in the
// Sawtooth REST API's error shape, {"error":{"code":80,"title":"Unauthorized","message":...}};
// a valid token without the scope gets 403 with code 83, naming the scope it lacks. Tokens
// are compared as SHA-256 digests with crypto/subtle, so the time taken depends neither on
// how much of a token matched nor on its length, and the tokens themselves are never logged
// or kept in memory after loading. See docs/operations.md, "Authentication, TLS and limits"
// and "Token scopes".
package httpauth
