package patroni

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// machineLockName is the file in the system's temp directory whose exclusive lock a cluster
// holds from Start to Stop: one cluster of this harness per machine at a time. Three members
// and etcd take most of a small machine, and two clusters side by side (two test packages,
// a test beside a chaos run) stretch failovers past the timings they are judged by.
const machineLockName = "batchclaim-patroni.lock"

// lockPollInterval is how often a waiting Start tries the lock again.
const lockPollInterval = 250 * time.Millisecond

// lockMachine takes the exclusive lock on path, waiting while another process holds it, until
// ctx ends. Closing the returned file releases it, as does the process's death; the file is
// not inherited by the processes the cluster starts (Go opens it close-on-exec).
func lockMachine(ctx context.Context, path string, log *slog.Logger) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o666)
	if err != nil {
		return nil, fmt.Errorf("patroni cluster: open lock %s: %w", path, err)
	}
	waited := false
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("patroni cluster: lock %s: %w", path, err)
		}
		if !waited {
			log.Info("another patroni cluster runs on this machine; waiting for it to stop", "lock", path)
			waited = true
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("patroni cluster: waiting for another cluster on this machine to stop (lock %s): %w", path, context.Cause(ctx))
		case <-time.After(lockPollInterval):
		}
	}
}

func machineLockPath() string { return filepath.Join(os.TempDir(), machineLockName) }
