package tcpproxy

import (
	"fmt"
	"net"
	"sync"
	"time"
)

// Mode is what the proxy does with the link.
type Mode int

// The modes of a Proxy.
const (
	// Pass forwards bytes as they come (after the latency, if one is set).
	Pass Mode = iota
	// Cut closes every connection and refuses new ones.
	Cut
	// Blackhole keeps connections open but moves no byte until the link is restored; new
	// connections are accepted and held unconnected.
	Blackhole
)

func (m Mode) String() string {
	switch m {
	case Pass:
		return "pass"
	case Cut:
		return "cut"
	case Blackhole:
		return "blackhole"
	}
	return fmt.Sprintf("mode(%d)", int(m))
}

// chunk is the most a pipe reads before it forwards.
const chunk = 32 << 10

// Proxy forwards TCP connections to a target. Its methods are safe for concurrent use.
type Proxy struct {
	ln     net.Listener
	target string

	mu      sync.Mutex
	mode    Mode
	latency time.Duration
	nextGen uint64        // the generation the next accepted connection gets
	frozen  uint64        // connections of a generation below this move no byte (Freeze)
	changed chan struct{} // closed and replaced on every change of mode or latency
	conns   map[net.Conn]struct{}
	closed  bool
}

// Start listens on addr (e.g. "127.0.0.1:0") and forwards every accepted connection to
// target. Close stops it.
func Start(addr, target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("tcpproxy: listen: %w", err)
	}
	p := &Proxy{ln: ln, target: target, changed: make(chan struct{}), conns: map[net.Conn]struct{}{}}
	go p.serve()
	return p, nil
}

// Addr is the address the proxy listens on.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Target is the address the proxy forwards to.
func (p *Proxy) Target() string { return p.target }

// Mode returns the current mode.
func (p *Proxy) Mode() Mode {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mode
}

// Cut closes every connection and refuses new ones until Restore.
func (p *Proxy) Cut() { p.set(Cut, -1) }

// Blackhole stops every byte in both directions, on open and new connections, until
// Restore; nothing is closed.
func (p *Proxy) Blackhole() { p.set(Blackhole, -1) }

// Freeze stops every byte in both directions on the connections open now, until Restore,
// while connections made after it pass: a server that vanished for the connections a client
// holds (no reset, no answer) while new ones reach it (a failover to a replacement behind the
// same address, a stateful firewall that lost its entries). Nothing is closed.
func (p *Proxy) Freeze() {
	p.mu.Lock()
	p.frozen = p.nextGen
	p.mu.Unlock()
	p.set(Pass, -1)
}

// Restore forwards again, on every connection, and removes the latency.
func (p *Proxy) Restore() {
	p.mu.Lock()
	p.frozen = 0
	p.mu.Unlock()
	p.set(Pass, 0)
}

// SetLatency delays every chunk of data in either direction by d (zero: none). It does not
// change the mode.
func (p *Proxy) SetLatency(d time.Duration) { p.set(-1, max(d, 0)) }

// set changes the mode (unless m < 0) and the latency (unless d < 0).
func (p *Proxy) set(m Mode, d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if m >= 0 {
		p.mode = m
	}
	if d >= 0 {
		p.latency = d
	}
	if p.mode == Cut || p.closed {
		for c := range p.conns {
			_ = c.Close()
			delete(p.conns, c)
		}
	}
	close(p.changed)
	p.changed = make(chan struct{})
}

// Close stops listening and closes every connection.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	err := p.ln.Close()
	p.set(Cut, 0)
	return err
}

func (p *Proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.handle(c)
	}
}

// handle connects one accepted connection to the target once the link lets it.
func (p *Proxy) handle(c net.Conn) {
	if !p.track(c) {
		_ = c.Close()
		return
	}
	p.mu.Lock()
	gen := p.nextGen
	p.nextGen++
	p.mu.Unlock()
	if _, ok := p.gate(gen); !ok {
		p.drop(c)
		return
	}
	up, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		p.drop(c)
		return
	}
	if !p.track(up) {
		_ = up.Close()
		p.drop(c)
		return
	}
	go p.pipe(c, up, gen)
	go p.pipe(up, c, gen)
}

// track registers an open connection; false when the link is cut or the proxy closed.
func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mode == Cut || p.closed {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) drop(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	_ = c.Close()
}

// gate waits while the link is blackholed (or the connection of generation gen frozen) and
// returns the latency to apply; false when the link is cut or the proxy closed.
func (p *Proxy) gate(gen uint64) (time.Duration, bool) {
	for {
		p.mu.Lock()
		mode, lat, ch, closed, frozen := p.mode, p.latency, p.changed, p.closed, gen < p.frozen
		p.mu.Unlock()
		switch {
		case closed || mode == Cut:
			return 0, false
		case mode == Pass && !frozen:
			return lat, true
		}
		<-ch
	}
}

// pipe copies src to dst chunk by chunk through the gate, then closes both.
func (p *Proxy) pipe(dst, src net.Conn, gen uint64) {
	defer p.drop(dst)
	defer p.drop(src)
	buf := make([]byte, chunk)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			lat, ok := p.gate(gen)
			if !ok {
				return
			}
			if lat > 0 && !p.sleep(lat) {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil { // io.EOF or a closed connection
			return
		}
	}
}

// sleep waits d unless the link is cut or the proxy closed meanwhile.
func (p *Proxy) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		p.mu.Lock()
		ch, dead := p.changed, p.closed || p.mode == Cut
		p.mu.Unlock()
		if dead {
			return false
		}
		select {
		case <-t.C:
			return true
		case <-ch:
		}
	}
}
