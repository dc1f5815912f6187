package httpguard

import (
	"net"
	"sync"
)

// LimitConns bounds the connections of ln open at once to max: one more is closed as soon as
// it is accepted (its client sees the connection reset and may retry), so that the memory
// each connection holds (its goroutine, buffers and headers being read) is bounded too.
func LimitConns(ln net.Listener, max int) net.Listener {
	return &connLimit{Listener: ln, sem: make(chan struct{}, max)}
}

type connLimit struct {
	net.Listener
	sem chan struct{}
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
			_ = c.Close()
		}
	}
}

type limitedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
