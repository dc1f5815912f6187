// Package httpguard is what every batchclaim listener puts in front of its routes before
// anything else runs: a request id, a check of the Host header, and the refusal of
// cross-origin browser requests that would change state; and the limits of the listener
// itself.
//
// Request ids. Every request gets an id: the client's X-Request-Id when it is 1 to 64
// characters of letters, digits and . _ : -, else 16 random hex digits. It is sent back in
// the X-Request-Id header of every answer, written into every error body that WriteError
// writes ({"error": {..., "request_id": ...}}), and added to every log line that a handler
// writes through Logger(ctx, log). An operator who gets an error from a client can find the
// log lines of that request by its id.
//
// Host checking. A browser that loads a page from an attacker's domain can be made to send
// requests to a listener on the loopback or a private network: the attacker's DNS name first
// points to the attacker's server, then to 127.0.0.1 (DNS rebinding). The browser then treats
// the listener as the attacker's own origin, sends the attacker's name in Host and Origin,
// and lets the page read the answers. Hosts lists the names a listener answers to: any IP
// address literal (a rebinding browser always sends a name), localhost, the host of the
// listen address when it is a name, and the names the operator adds (--allowed-hosts; a
// leading dot matches every subdomain, "*" turns the check off). A request naming another
// host is answered 421 Misdirected Request and goes no further. Paths given as open
// (health, readiness and metrics, which load balancers and scrapers may reach under any
// name) skip the check for GET and HEAD.
//
// Cross-origin refusal. A request with a method other than GET, HEAD or OPTIONS that a
// browser sends from another origin (its Origin header names another host than Host, or is
// "null", or Sec-Fetch-Site says cross-site) is answered 403: a page elsewhere cannot post
// batches or resume a halted service_id through an operator's browser. A GET or HEAD of one
// of CostlyGETs (the profiles, which run for the seconds asked) is refused the same way when
// a browser sends it from another site or origin (Sec-Fetch-Site other than same-origin or
// none, or a foreign Origin): a page's <img> cannot start one. Clients that are not browsers
// send neither header and pass.
//
// One listener. Listen (and Start, which also serves) builds every HTTP server batchclaim
// starts: the handler behind the Guard, read, header, write and idle timeouts, a bound on the
// header block and on the connections open at once (LimitConns), and ErrorLog. A listener with
// open paths keeps ProbeConnections beyond its cap for them: when clients hold every regular
// connection, a probe still gets an answer (anything else on such a connection gets 503). The
// write timeout frees the connection of a client that asks for answers and never reads them;
// a handler that rightly works for long before it answers (a profile) extends it
// (LimitSeconds, ExtendWriteDeadline). A server built any other way lacks one of these; a test
// of the program looks through the source for such servers.
//
// ErrorLog gives an http.Server an error log that writes the failed TLS handshakes any client
// can cause at debug level and everything else at warn, so that a client cannot fill the log.
// Throttle does the same for a handler's own lines that a client can cause at will (an error
// per request during a database outage): per site, the first line, then a count per interval.
package httpguard
