package pglocal

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// Ports are picked below the kernel's ephemeral range, from portFloor up. A port from that
// range (what listening on port 0 returns) is also what the kernel hands an outgoing
// connection as its local port: between FreePort and the server's bind, or while a server is
// down for a restart, any client connection on the machine may take it, and the server then
// cannot bind (a Patroni member's Postgres ends "start failed").
const (
	portFloor           = 10000
	ephemeralLowDefault = 32768
	// portTries bounds the random picks before FreePort gives up.
	portTries = 200
)

var (
	portsMu sync.Mutex
	// portsGiven are the ports FreePort returned in this process: never returned twice, so
	// two servers started side by side never pick the same one while neither listens yet.
	portsGiven = map[int]bool{}
)

// FreePort returns a port on 127.0.0.1 that nothing listens on, below the kernel's ephemeral
// port range (so no outgoing connection takes it), and that this process has not been given
// before. Another process may still take it before the server meant to bind it does; Start
// and StartStandby retry then.
func FreePort() (int, error) {
	hi := ephemeralLow()
	if hi-portFloor < 1000 {
		return kernelPort()
	}
	portsMu.Lock()
	defer portsMu.Unlock()
	for range portTries {
		p := portFloor + rand.IntN(hi-portFloor)
		if portsGiven[p] {
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			continue
		}
		_ = l.Close()
		portsGiven[p] = true
		return p, nil
	}
	return 0, fmt.Errorf("find a free port: none free among %d tries in %d-%d", portTries, portFloor, hi-1)
}

// ephemeralLow is the first port of the kernel's ephemeral range (Linux's
// ip_local_port_range), or 32768 where it cannot be read.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return ephemeralLowDefault
	}
	lo, err := strconv.Atoi(strings.Fields(string(b) + " x")[0])
	if err != nil || lo <= 0 {
		return ephemeralLowDefault
	}
	return lo
}

// kernelPort asks the kernel for a free port, for machines whose ephemeral range leaves too
// few ports below it.
func kernelPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
