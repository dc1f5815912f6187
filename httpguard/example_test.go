package httpguard_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/batchclaim/batchclaim/httpguard"
)

// LoopbackOnly tells whether a listen address keeps the listener to this machine: an empty
// host means every interface, and a host name other than localhost may resolve elsewhere.
func ExampleLoopbackOnly() {
	for _, addr := range []string{"127.0.0.1:8080", "localhost:8080", "[::1]:8080", ":8080", "0.0.0.0:8080", "ops.example.com:8080"} {
		fmt.Printf("%-20s %v\n", addr, httpguard.LoopbackOnly(addr))
	}
	// Output:
	// 127.0.0.1:8080       true
	// localhost:8080       true
	// [::1]:8080           true
	// :8080                false
	// 0.0.0.0:8080         false
	// ops.example.com:8080 false
}

// Start serves a handler behind the guard. The client's X-Request-Id comes back in the
// answer and in the error body WriteError writes; an id that is not safe to log is replaced
// by 16 hex digits. A request naming a host the listener does not answer to gets 421 (an
// open path is served under any name), a cross-origin write 403, and the handler runs for
// neither. Shutdown stops the server; Listen refuses a Config without a handler.
func ExampleStart() {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("POST /batches", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Content-Type") != "application/json" {
			httpguard.WriteError(w, http.StatusBadRequest, 30, "Bad Request", "Send the batch as application/json")
			return
		}
		fmt.Fprintln(w, "stored under request", httpguard.RequestID(r.Context()))
	})
	srv, addr, err := httpguard.Start(httpguard.Config{Addr: "127.0.0.1:0", Handler: mux, OpenPaths: []string{"/healthz"}})
	if err != nil {
		panic(err)
	}
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	do := func(method, path, host, id string, header ...string) {
		req, err := http.NewRequest(method, "http://"+addr+path, strings.NewReader("{}"))
		if err != nil {
			panic(err)
		}
		req.Host = host
		req.Header.Set(httpguard.HeaderRequestID, id)
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := client.Do(req)
		if err != nil {
			panic(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		body, echoed := strings.TrimSpace(string(b)), resp.Header.Get(httpguard.HeaderRequestID)
		if echoed != id && len(echoed) == 16 && strings.Trim(echoed, "0123456789abcdef") == "" {
			body, echoed = strings.ReplaceAll(body, echoed, "<new>"), "<new>, 16 hex digits"
		}
		name := host // without the port, which differs from run to run
		if h, _, err := net.SplitHostPort(host); err == nil {
			name = h
		}
		fmt.Printf("%s %s Host %s: %d, id %s\n  %s\n", method, path, name, resp.StatusCode, echoed, body)
	}
	local := "localhost" + addr[strings.LastIndex(addr, ":"):]

	do("POST", "/batches", local, "op-17", "Content-Type", "application/json")
	do("POST", "/batches", local, "op-18", "Content-Type", "text/plain")
	do("POST", "/batches", local, "not a safe id", "Content-Type", "application/json")
	do("POST", "/batches", "rebind.evil.example", "op-19", "Content-Type", "application/json")
	do("GET", "/healthz", "rebind.evil.example", "op-20")
	do("POST", "/batches", local, "op-21", "Content-Type", "application/json", "Origin", "http://rebind.evil.example")

	fmt.Println("shutdown:", httpguard.Shutdown(context.Background(), srv, 5*time.Second))
	_, err = client.Get("http://" + addr + "/healthz")
	fmt.Println("served after shutdown:", err == nil)

	_, _, err = httpguard.Listen(httpguard.Config{Addr: "127.0.0.1:0"})
	fmt.Println(err)
	// Output:
	// POST /batches Host localhost: 200, id op-17
	//   stored under request op-17
	// POST /batches Host localhost: 400, id op-18
	//   {"error":{"code":30,"title":"Bad Request","message":"Send the batch as application/json","request_id":"op-18"}}
	// POST /batches Host localhost: 200, id <new>, 16 hex digits
	//   stored under request <new>
	// POST /batches Host rebind.evil.example: 421, id op-19
	//   {"error":{"code":81,"title":"Misdirected Request","message":"This server does not answer to the host named in the request; its operator can allow the name with --allowed-hosts","request_id":"op-19"}}
	// GET /healthz Host rebind.evil.example: 200, id op-20
	//   ok
	// POST /batches Host localhost: 403, id op-21
	//   {"error":{"code":82,"title":"Cross-Origin Request Refused","message":"A browser request from another origin may not change anything here","request_id":"op-21"}}
	// shutdown: <nil>
	// served after shutdown: false
	// listener: a handler is required
}

// LimitConns keeps at most max connections of a listener open at once. One more is closed as
// soon as it is accepted (reserve 0 here: no probe connections); once a held connection
// closes, the next one is accepted.
func ExampleLimitConns() {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	ln := httpguard.LimitConns(inner, 1, 0, time.Second)
	defer ln.Close()
	dial := func() net.Conn {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			panic(err)
		}
		return c
	}

	first := dial()
	defer first.Close()
	held, err := ln.Accept()
	if err != nil {
		panic(err)
	}

	second := dial()
	defer second.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept() // closes the second connection, then waits for another
		if err == nil {
			accepted <- c
		}
	}()
	_ = second.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err = second.Read(make([]byte, 1))
	var ne net.Error
	fmt.Println("second connection closed by the listener:", err != nil && !(errors.As(err, &ne) && ne.Timeout()))

	_ = held.Close() // frees its place
	third := dial()
	defer third.Close()
	c := <-accepted
	defer c.Close()
	fmt.Println("third connection accepted:", c.RemoteAddr().String() == third.LocalAddr().String())
	// Output:
	// second connection closed by the listener: true
	// third connection accepted: true
}

// A Throttle writes the first line of a site in full and counts the ones that follow within
// its interval; Clear writes the count at once, when what the site reports is over, and the
// site's next line is written in full again.
func ExampleThrottle() {
	log := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && a.Key == slog.TimeKey {
				return slog.Attr{} // no timestamps in this example's output
			}
			return a
		},
	}))
	th := httpguard.NewThrottle(log, time.Minute)
	ctx := context.Background()
	for _, err := range []string{"connection refused", "connection refused", "timeout"} {
		th.Log(ctx, slog.LevelWarn, "ledger unreachable", "error", err)
	}
	fmt.Println("cleared:", th.Clear("ledger unreachable"))
	th.Log(ctx, slog.LevelWarn, "ledger unreachable", "error", "connection refused")
	fmt.Println("cleared:", th.Clear("ledger unreachable"))
	fmt.Println("cleared:", th.Clear("ledger unreachable"))
	// Output:
	// level=WARN msg="ledger unreachable" error="connection refused"
	// level=WARN msg="ledger unreachable: 2 more like this in the last 1m0s" error=timeout
	// cleared: true
	// level=WARN msg="ledger unreachable" error="connection refused"
	// cleared: true
	// cleared: false
}
