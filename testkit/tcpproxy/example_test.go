package tcpproxy_test

import (
	"fmt"
	"io"
	"net"

	"github.com/batchclaim/batchclaim/testkit/tcpproxy"
)

// A proxy in front of a server: cut the link, see a connection fail, restore it.
func Example() {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c); c.Close() }()
		}
	}()
	p, _ := tcpproxy.Start("127.0.0.1:0", ln.Addr().String())
	defer p.Close()

	try := func() string {
		c, err := net.Dial("tcp", p.Addr())
		if err != nil {
			return "refused"
		}
		defer c.Close()
		_, _ = c.Write([]byte("x"))
		b := make([]byte, 1)
		if _, err := io.ReadFull(c, b); err != nil {
			return "closed"
		}
		return "echoed " + string(b)
	}
	fmt.Println(p.Mode(), try())
	p.Cut()
	fmt.Println(p.Mode(), try())
	p.Restore()
	fmt.Println(p.Mode(), try())
	// Output:
	// pass echoed x
	// cut closed
	// pass echoed x
}
