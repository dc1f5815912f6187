package node_test

import (
	"context"
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/batchclaim/batchclaim/dlt"
	"github.com/batchclaim/batchclaim/dlt/dltsim"
	"github.com/batchclaim/batchclaim/internal/history"
)

// proxy is a TCP proxy in front of Postgres whose link can be cut and restored.
type proxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	cut    bool
	conns  map[net.Conn]struct{}
}

func newProxy(t *testing.T, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	t.Cleanup(func() { ln.Close(); p.Cut() })
	go p.serve()
	return p
}

func (p *proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		cut := p.cut
		p.mu.Unlock()
		if cut {
			c.Close()
			continue
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns[c], p.conns[up] = struct{}{}, struct{}{}
		p.mu.Unlock()
		go pipe(c, up)
		go pipe(up, c)
	}
}

func pipe(dst, src net.Conn) {
	_, _ = io.Copy(dst, src)
	dst.Close()
	src.Close()
}

// Cut drops every connection and refuses new ones until Restore.
func (p *proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for c := range p.conns {
		c.Close()
		delete(p.conns, c)
	}
}

func (p *proxy) Restore() {
	p.mu.Lock()
	p.cut = false
	p.mu.Unlock()
}

// TestDatabaseLinkCutAndBackendsKilled: instance a loses its database link for longer than
// expiry-2 while work is in flight, then gets it back; instance b's backends are killed with
// pg_terminate_backend. a must fence itself, b must take over, and in the end every batch is
// committed in order, with one owner at a time per service_id.
func TestDatabaseLinkCutAndBackendsKilled(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := setup(t, dlt.FlavorSawtooth, dltsim.Config{CommitLatency: 50 * time.Millisecond})
	u, err := url.Parse(e.url)
	if err != nil {
		t.Fatal(err)
	}
	p := newProxy(t, u.Host)
	viaProxy := *u
	viaProxy.Host = p.ln.Addr().String()
	direct := *u
	q := direct.Query()
	q.Set("application_name", "node-b")
	direct.RawQuery = q.Encode()

	e.enqueue(8, 6)
	a, _ := e.startOn(viaProxy.String(), "a", nil)
	b, _ := e.startOn(direct.String(), "b", nil)
	waitFor(t, 30*time.Second, "both instances working", func() bool {
		return len(e.sim.Committed()) >= 8 && a.Engine().Stats().Held > 0 && b.Engine().Stats().Held > 0
	})

	p.Cut()
	waitFor(t, 30*time.Second, "a fenced itself and b holds every service_id", func() bool {
		var bHeld int
		_ = e.admin.QueryRow(ctx, `SELECT count(*) FROM service_id_claims WHERE claimant = $1`, b.Engine().InstanceID()).Scan(&bHeld)
		return a.Engine().Stats().DeadlineFences >= 1 && bHeld == 8
	})
	p.Restore()

	var killed int
	if err := e.admin.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = 'node-b'`).Scan(&killed); err != nil {
		t.Fatal(err)
	}
	if killed == 0 {
		t.Fatal("no backend of b to terminate")
	}
	e.waitFinished(60 * time.Second)
	e.check()
	rep, err := history.CheckClaims(ctx, e.admin)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Problems) > 0 {
		t.Fatalf("claim history: %v", rep.Problems)
	}
	if b.Engine().Stats().Voided == 0 {
		t.Fatal("b never took a claim over from a")
	}
}
