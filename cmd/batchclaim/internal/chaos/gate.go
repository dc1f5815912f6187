package chaos

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// gate forwards an instance's database connections to its proxy, and can refuse new ones
// while those it carries go on: what an instance sees when its pool cannot get a connection
// while the connections it has keep working (pool_hog keeps the lease loop's connection and
// refuses every new one).
type gate struct {
	ln     net.Listener
	target string
	refuse atomic.Bool

	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

func startGate(target string) (*gate, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	g := &gate{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	go g.serve()
	return g, nil
}

func (g *gate) addr() string { return g.ln.Addr().String() }

// refuseNew makes the gate close every new connection at once (on) or pass it (off).
func (g *gate) refuseNew(on bool) { g.refuse.Store(on) }

func (g *gate) serve() {
	for {
		c, err := g.ln.Accept()
		if err != nil {
			return
		}
		if g.refuse.Load() {
			_ = c.Close()
			continue
		}
		go g.handle(c)
	}
}

func (g *gate) handle(c net.Conn) {
	up, err := net.DialTimeout("tcp", g.target, 5*time.Second)
	if err != nil {
		_ = c.Close()
		return
	}
	if !g.track(c, up) {
		return
	}
	go g.pipe(c, up)
	go g.pipe(up, c)
}

func (g *gate) track(cs ...net.Conn) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.conns == nil { // closed
		for _, c := range cs {
			_ = c.Close()
		}
		return false
	}
	for _, c := range cs {
		g.conns[c] = struct{}{}
	}
	return true
}

// pipe copies src to dst, then closes both.
func (g *gate) pipe(dst, src net.Conn) {
	_, _ = io.Copy(dst, src)
	g.mu.Lock()
	delete(g.conns, dst)
	delete(g.conns, src)
	g.mu.Unlock()
	_ = dst.Close()
	_ = src.Close()
}

func (g *gate) close() {
	_ = g.ln.Close()
	g.mu.Lock()
	conns := g.conns
	g.conns = nil
	g.mu.Unlock()
	for c := range conns {
		_ = c.Close()
	}
}
