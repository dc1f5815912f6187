// Package tcpproxy is a TCP proxy for fault tests: it forwards connections from a loopback
// port to a target address and can cut the link (every connection closed, new ones refused),
// blackhole it (connections stay open but no byte moves either way until the link is
// restored, as when packets vanish on the wire) or delay every chunk of data by a fixed
// latency. The chaos command puts one in front of Postgres for each instance; node's fault
// tests use it too.
package tcpproxy
