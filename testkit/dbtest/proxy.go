package dbtest

import (
	"net/url"
	"testing"

	"github.com/batchclaim/batchclaim/testkit/tcpproxy"
)

// Proxied starts a TCP proxy in front of the server dbURL names, closed when the test ends,
// and returns it with dbURL pointed at it: connections made with the returned URL go through
// the proxy, whose link the test can cut, blackhole, freeze or slow down.
func Proxied(t testing.TB, dbURL string) (*tcpproxy.Proxy, string) {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	p, err := tcpproxy.Start("127.0.0.1:0", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	u.Host = p.Addr()
	return p, u.String()
}
