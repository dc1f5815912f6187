package httpguard

import (
	"context"
	"crypto/tls"
	"net"
	"sync"
	"time"
)

// LimitConns bounds the connections of ln open at once to max, plus reserve more that may
// only reach the listener's open paths (health, readiness, metrics: Guard refuses anything
// else on them with 503), each for at most probeTimeout and for one request. One more is
// closed as soon as it is accepted (its client sees the connection reset and may retry), so
// that the memory each connection holds (its goroutine, buffers and headers being read) is
// bounded too; and clients that hold every regular connection (slow bodies, idle keep-alives)
// do not make a kubelet or a load balancer see a healthy process as dead.
func LimitConns(ln net.Listener, max, reserve int, probeTimeout time.Duration) net.Listener {
	return &connLimit{Listener: ln, sem: make(chan struct{}, max), probes: make(chan struct{}, reserve), probeTimeout: probeTimeout}
}

type connLimit struct {
	net.Listener
	sem, probes  chan struct{}
	probeTimeout time.Duration
}

func (l *connLimit) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		select {
		case l.sem <- struct{}{}:
			return &limitedConn{Conn: c, release: func() { <-l.sem }}, nil
		default:
		}
		select {
		case l.probes <- struct{}{}:
			lc := &limitedConn{Conn: c, release: func() { <-l.probes }, until: time.Now().Add(l.probeTimeout)}
			_ = c.SetDeadline(lc.until)
			return lc, nil
		default:
			_ = c.Close()
		}
	}
}

// limitedConn is a connection counted against a limit until it closes. A connection of the
// reserve (until set) may only serve probes: no deadline set on it reaches past until.
type limitedConn struct {
	net.Conn
	once    sync.Once
	release func()
	until   time.Time
}

// Close frees the connection's slot, then closes it: by the time its client sees it closed,
// a new connection of that client is accepted in its place rather than closed as one beyond
// the limit. While a connection closes, one more than the limit may be open for a moment.
func (c *limitedConn) Close() error {
	c.once.Do(c.release)
	return c.Conn.Close()
}

func (c *limitedConn) clamp(t time.Time) time.Time {
	if !c.until.IsZero() && (t.IsZero() || t.After(c.until)) {
		return c.until
	}
	return t
}

func (c *limitedConn) SetDeadline(t time.Time) error      { return c.Conn.SetDeadline(c.clamp(t)) }
func (c *limitedConn) SetReadDeadline(t time.Time) error  { return c.Conn.SetReadDeadline(c.clamp(t)) }
func (c *limitedConn) SetWriteDeadline(t time.Time) error { return c.Conn.SetWriteDeadline(c.clamp(t)) }

// probeOnly reports whether c (or the connection under its TLS) is one of the reserve.
func probeOnly(c net.Conn) bool {
	if t, ok := c.(*tls.Conn); ok {
		c = t.NetConn()
	}
	lc, ok := c.(*limitedConn)
	return ok && !lc.until.IsZero()
}

type probeKey struct{}

// connContext marks the requests of a reserve connection for Guard (http.Server.ConnContext).
func connContext(ctx context.Context, c net.Conn) context.Context {
	if probeOnly(c) {
		return context.WithValue(ctx, probeKey{}, true)
	}
	return ctx
}

// onProbeConn reports whether the request whose context is ctx came on a reserve connection.
func onProbeConn(ctx context.Context) bool {
	v, _ := ctx.Value(probeKey{}).(bool)
	return v
}
