package tcpproxy_test

import (
	"bufio"
	"io"
	"net"
	"testing"
	"time"

	"github.com/batchclaim/batchclaim/testkit/tcpproxy"
)

// echo serves an echo server on a loopback port until the test ends.
func echo(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c); c.Close() }()
		}
	}()
	return ln.Addr().String()
}

func setup(t *testing.T) *tcpproxy.Proxy {
	t.Helper()
	p, err := tcpproxy.Start("127.0.0.1:0", echo(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func dial(t *testing.T, p *tcpproxy.Proxy) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, bufio.NewReader(c)
}

// roundTrip writes a line and reads it back within limit.
func roundTrip(c net.Conn, r *bufio.Reader, limit time.Duration) (time.Duration, error) {
	start := time.Now()
	_ = c.SetDeadline(start.Add(limit))
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return 0, err
	}
	if _, err := r.ReadString('\n'); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

func TestModes(t *testing.T) {
	t.Parallel()
	t.Run("pass forwards both ways", func(t *testing.T) {
		t.Parallel()
		p := setup(t)
		c, r := dial(t, p)
		if _, err := roundTrip(c, r, 10*time.Second); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("latency delays every chunk each way", func(t *testing.T) {
		t.Parallel()
		p := setup(t)
		p.SetLatency(100 * time.Millisecond)
		c, r := dial(t, p)
		took, err := roundTrip(c, r, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if took < 200*time.Millisecond {
			t.Fatalf("round trip took %v, want at least 2 x 100ms", took)
		}
	})
	t.Run("blackhole holds bytes until restored", func(t *testing.T) {
		t.Parallel()
		p := setup(t)
		c, r := dial(t, p)
		if _, err := roundTrip(c, r, 10*time.Second); err != nil {
			t.Fatal(err)
		}
		p.Blackhole()
		if _, err := roundTrip(c, r, 300*time.Millisecond); err == nil {
			t.Fatal("a byte crossed the blackhole")
		}
		c2, r2 := dial(t, p) // a new connection is accepted and held too
		_ = c2.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := c2.Write([]byte("held\n")); err != nil {
			t.Fatal(err)
		}
		p.Restore()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		if line, err := r.ReadString('\n'); err != nil || line != "ping\n" {
			t.Fatalf("after restore: %q, %v", line, err)
		}
		if line, err := r2.ReadString('\n'); err != nil || line != "held\n" {
			t.Fatalf("held connection after restore: %q, %v", line, err)
		}
	})
	t.Run("freeze holds the open connections and lets new ones pass", func(t *testing.T) {
		t.Parallel()
		p := setup(t)
		c, r := dial(t, p)
		if _, err := roundTrip(c, r, 10*time.Second); err != nil {
			t.Fatal(err)
		}
		p.Freeze()
		if _, err := roundTrip(c, r, 300*time.Millisecond); err == nil {
			t.Fatal("a byte crossed a frozen connection")
		}
		c2, r2 := dial(t, p)
		if _, err := roundTrip(c2, r2, 10*time.Second); err != nil {
			t.Fatalf("a connection made after the freeze: %v", err)
		}
		p.Restore()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		if line, err := r.ReadString('\n'); err != nil || line != "ping\n" {
			t.Fatalf("after restore: %q, %v", line, err)
		}
	})
	t.Run("cut closes connections and refuses new ones until restored", func(t *testing.T) {
		t.Parallel()
		p := setup(t)
		c, r := dial(t, p)
		p.Cut()
		if _, err := roundTrip(c, r, 10*time.Second); err == nil {
			t.Fatal("a connection survived the cut")
		}
		c2, r2 := dial(t, p)
		if _, err := roundTrip(c2, r2, 10*time.Second); err == nil {
			t.Fatal("a new connection got through the cut")
		}
		p.Restore()
		c3, r3 := dial(t, p)
		if _, err := roundTrip(c3, r3, 10*time.Second); err != nil {
			t.Fatalf("after restore: %v", err)
		}
	})
}
