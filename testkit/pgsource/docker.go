package pgsource

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// pingTimeout bounds the check that a Docker engine answers.
const pingTimeout = 2 * time.Second

// dockerReachable reports whether a Docker engine answers /_ping quickly, so that a machine
// without Docker does not wait for testcontainers to give up. It checks DOCKER_HOST when set,
// else the usual socket paths. Endpoints it cannot ping itself (TLS, ssh://) count as
// reachable and are left to testcontainers.
func dockerReachable(ctx context.Context) (endpoint string, ok bool) {
	host := os.Getenv("DOCKER_HOST")
	switch {
	case strings.HasPrefix(host, "unix://"):
		path := strings.TrimPrefix(host, "unix://")
		return host, ping(ctx, "unix", path)
	case strings.HasPrefix(host, "tcp://") && os.Getenv("DOCKER_TLS_VERIFY") == "":
		return host, ping(ctx, "tcp", strings.TrimPrefix(host, "tcp://"))
	case host != "":
		return host, true
	}
	sockets := []string{"/var/run/docker.sock"}
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		sockets = append(sockets, filepath.Join(d, "docker.sock"))
	}
	if d, err := os.UserHomeDir(); err == nil {
		sockets = append(sockets, filepath.Join(d, ".docker", "run", "docker.sock"))
	}
	for _, s := range sockets {
		if _, err := os.Stat(s); err == nil && ping(ctx, "unix", s) {
			return "unix://" + s, true
		}
	}
	return strings.Join(sockets, ", "), false
}

// ping sends GET /_ping to a Docker engine API at network/addr.
func ping(ctx context.Context, network, addr string) bool {
	ctx, cancel := context.WithTimeout(ctx, pingTimeout)
	defer cancel()
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}}
	defer tr.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://docker/_ping", nil)
	if err != nil {
		return false
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}
