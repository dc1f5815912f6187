package httpguard_test

import (
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batchclaim/batchclaim/httpguard"
)

// chanListener accepts the connections sent on it.
type chanListener struct {
	conns chan net.Conn
	done  chan struct{}
}

func (l *chanListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}
func (l *chanListener) Close() error   { return nil }
func (l *chanListener) Addr() net.Addr { return &net.TCPAddr{} }

// heldConn is a connection whose Close reports that it began and then waits for proceed:
// the moment its client could see it closed.
type heldConn struct {
	net.Conn
	closing, proceed chan struct{}
	closed           atomic.Bool
}

func newHeldConn(t *testing.T) *heldConn {
	a, b := net.Pipe()
	t.Cleanup(func() { _ = a.Close(); _ = b.Close() })
	return &heldConn{Conn: a, closing: make(chan struct{}), proceed: make(chan struct{})}
}

func (c *heldConn) Close() error {
	c.closed.Store(true)
	close(c.closing)
	<-c.proceed
	return c.Conn.Close()
}

// A connection's slot is free by the time its client can see it closed: a client that
// reconnects at once (a probe after its previous one, a kubelet retrying) is accepted, not
// closed as one beyond the limit.
func TestLimitConnsFreesTheSlotBeforeTheClose(t *testing.T) {
	t.Parallel()
	ln := &chanListener{conns: make(chan net.Conn, 2), done: make(chan struct{})}
	defer close(ln.done)
	lim := httpguard.LimitConns(ln, 1, 0, time.Second)
	first := newHeldConn(t)
	ln.conns <- first
	c1, err := lim.Accept()
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = c1.Close() }()
	<-first.closing
	defer close(first.proceed)
	second := newHeldConn(t)
	close(second.proceed)
	ln.conns <- second
	accepted := make(chan net.Conn, 1)
	go func() {
		if c, err := lim.Accept(); err == nil {
			accepted <- c
		}
	}()
	select {
	case c := <-accepted:
		if c == nil || second.closed.Load() {
			t.Fatalf("accepted %v, the second connection closed: %v", c, second.closed.Load())
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("a connection made while the first one was closing was not accepted (closed: %v)", second.closed.Load())
	}
}
