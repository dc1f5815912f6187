package pglocal

import (
	"net"
	"strconv"
	"testing"
)

// The ports FreePort hands out are bindable, distinct within the process, and below the
// kernel's ephemeral range, where no outgoing connection's local port can take them.
func TestFreePortBelowEphemeralRange(t *testing.T) {
	t.Parallel()
	hi := ephemeralLow()
	if hi-portFloor < 1000 {
		t.Skipf("ephemeral range starts at %d: FreePort falls back to the kernel's pick", hi)
	}
	seen := map[int]bool{}
	for range 300 {
		p, err := FreePort()
		if err != nil {
			t.Fatal(err)
		}
		if p < portFloor || p >= hi {
			t.Fatalf("port %d outside %d-%d", p, portFloor, hi-1)
		}
		if seen[p] {
			t.Fatalf("port %d handed out twice", p)
		}
		seen[p] = true
	}
	p, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
	if err != nil {
		t.Fatalf("port %d from FreePort: %v", p, err)
	}
	_ = l.Close()
}

// A port something listens on is never handed out.
func TestFreePortSkipsListenedPorts(t *testing.T) {
	t.Parallel()
	if hi := ephemeralLow(); hi-portFloor < 1000 {
		t.Skipf("ephemeral range starts at %d", hi)
	}
	var held []net.Listener
	taken := map[int]bool{}
	defer func() {
		for _, l := range held {
			_ = l.Close()
		}
	}()
	// Occupy a thousand ports of the range (briefly: other test processes pick from it too);
	// FreePort must step around every one.
	for p := portFloor; p < portFloor+1000; p++ {
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			continue
		}
		held = append(held, l)
		taken[p] = true
	}
	for range 200 {
		p, err := FreePort()
		if err != nil {
			t.Fatal(err)
		}
		if taken[p] {
			t.Fatalf("FreePort returned %d, which a listener holds", p)
		}
	}
}
