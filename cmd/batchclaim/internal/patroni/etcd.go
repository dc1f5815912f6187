package patroni

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/batchclaim/batchclaim/testkit/pglocal"
)

// etcd is the cluster's one-node etcd (v3 API), on fixed ports so that a restart keeps its
// address and data.
type etcd struct {
	bin, dir             string
	clientPort, peerPort int

	mu   sync.Mutex
	proc *process // nil while stopped
}

func newEtcd(bin, dir string) (*etcd, error) {
	e := &etcd{bin: bin, dir: dir}
	var err error
	if e.clientPort, err = pglocal.FreePort(); err != nil {
		return nil, err
	}
	if e.peerPort, err = pglocal.FreePort(); err != nil {
		return nil, err
	}
	return e, nil
}

func (e *etcd) addr() string { return "127.0.0.1:" + strconv.Itoa(e.clientPort) }

func (e *etcd) logPath() string { return filepath.Join(e.dir, "etcd.log") }

// start runs etcd and waits until it answers healthy.
func (e *etcd) start(ctx context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.proc != nil {
		return errors.New("etcd already running")
	}
	client := "http://" + e.addr()
	peer := "http://127.0.0.1:" + strconv.Itoa(e.peerPort)
	p, err := spawn(e.logPath(), nil, []string{"ETCD_UNSUPPORTED_ARCH="}, e.bin,
		"--name", "etcd1", "--data-dir", filepath.Join(e.dir, "etcd"),
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
		"--initial-cluster", "etcd1="+peer, "--initial-cluster-state", "new",
		"--heartbeat-interval", "100", "--election-timeout", "1000")
	if err != nil {
		return err
	}
	e.proc = p
	return e.waitHealthy(ctx, p)
}

func (e *etcd) waitHealthy(ctx context.Context, p *process) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var last error
	for {
		if last = e.health(ctx); last == nil {
			return nil
		}
		select {
		case <-p.done:
			return fmt.Errorf("etcd exited during startup; log %s: %s", e.logPath(), tailFile(e.logPath(), 600))
		case <-ctx.Done():
			return fmt.Errorf("etcd not healthy: %w (last error: %v)", ctx.Err(), last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (e *etcd) health(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+e.addr()+"/health", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"true"`) {
		return fmt.Errorf("etcd health: %s %s", resp.Status, body)
	}
	return nil
}

// stop ends etcd: SIGTERM, or SIGKILL when kill is set or it does not exit within 10s.
func (e *etcd) stop(kill bool) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	p := e.proc
	if p == nil {
		return nil
	}
	e.proc = nil
	sig := syscall.SIGTERM
	if kill {
		sig = syscall.SIGKILL
	}
	if err := p.kill(sig, true, 10*time.Second); err != nil {
		return p.kill(syscall.SIGKILL, true, 10*time.Second)
	}
	return nil
}
